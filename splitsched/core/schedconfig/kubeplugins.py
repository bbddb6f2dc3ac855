"""kube-scheduler v1.36's in-tree plugins, as a configuration sees them: the extension
points each implements, the default profile, and what each is here.

A KubeSchedulerConfiguration names kube's plugins; splitsched runs most of them as
plugins (`splitsched.core.plugins.REGISTRY`), builds three into its pipeline instead
(`BUILT_IN`: the queue sorts, the state holds back gated pods, the binder binds), and
does not run the rest (`NOT_RUN`, with the reason a notice gives). `SPLITSCHED_ONLY` adds
splitsched's own opt-in plugins (DevicePacking), which only a profile that names them runs. Read by
`schedconfig.resolve` (which plugins run where) and `profiles` (what to build).

Sources, k8s.io/kubernetes v1.36.3: pkg/scheduler/framework/plugins/registry.go (the
names), each plugin's methods (its points), apis/config/v1/default_plugins.go with
v1.36's default feature gates (the default profile: DynamicResourceAllocation GA and
NodeDeclaredFeatures beta on; GangScheduling and TopologyAwareWorkloadScheduling alpha,
off).
"""

from __future__ import annotations

from collections.abc import Mapping

#: Extension points a v1 `plugins` section has, in kube's order of a scheduling attempt.
POINTS: tuple[str, ...] = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "placementGenerate",
    "placementScore",
)
MULTI_POINT = "multiPoint"

_FILTERS = frozenset({"preFilter", "filter"})
_SCORES = frozenset({"preScore", "score"})

#: Each in-tree plugin's extension points (the methods it has in kube).
KUBE_POINTS_OF: Mapping[str, frozenset[str]] = {
    "PrioritySort": frozenset({"queueSort"}),
    "SchedulingGates": frozenset({"preEnqueue"}),
    "DefaultBinder": frozenset({"bind"}),
    "DefaultPreemption": frozenset({"preEnqueue", "postFilter"}),
    "NodeUnschedulable": frozenset({"filter"}),
    "NodeName": frozenset({"filter"}),
    "TaintToleration": frozenset({"filter"}) | _SCORES,
    "NodeAffinity": _FILTERS | _SCORES,
    "NodePorts": _FILTERS,
    "NodeResourcesFit": _FILTERS | _SCORES | {"placementScore"},
    "VolumeRestrictions": _FILTERS,
    "NodeVolumeLimits": _FILTERS,
    "VolumeBinding": _FILTERS | _SCORES | {"reserve", "preBind"},
    "VolumeZone": _FILTERS,
    "PodTopologySpread": _FILTERS | _SCORES,
    "InterPodAffinity": _FILTERS | _SCORES,
    "NodeResourcesBalancedAllocation": _SCORES,
    "ImageLocality": frozenset({"score"}),
    "DynamicResources": _FILTERS | {"preEnqueue", "postFilter", "score", "reserve", "preBind"},
    "NodeDeclaredFeatures": _FILTERS,
    "GangScheduling": frozenset({"preEnqueue", "permit"}),
    "TopologyPlacementGenerator": frozenset({"placementGenerate"}),
    "PodGroupPodsCount": frozenset({"placementScore"}),
}

#: splitsched's own plugins, with their points: not kube-scheduler's, never in the
#: default profile; a profile enables one by name like any other (opt-in).
SPLITSCHED_ONLY: Mapping[str, frozenset[str]] = {
    "DevicePacking": frozenset({"preFilter", "score"}),
}

#: Every plugin a profile may name, with its points.
POINTS_OF: Mapping[str, frozenset[str]] = {**KUBE_POINTS_OF, **SPLITSCHED_ONLY}

#: kube's default profile: its multiPoint plugins in order, with their score weights.
DEFAULT_MULTI_POINT: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
    ("NodeDeclaredFeatures", None),
)

#: (plugin, point) that splitsched always runs, built into its pipeline rather than
#: configurable: a profile that leaves one out asks for what cannot be honoured here.
BUILT_IN: Mapping[tuple[str, str], str] = {
    ("SchedulingGates", "preEnqueue"): (
        "splitsched never schedules a pod that has schedulingGates (the API server "
        "refuses to bind one anyway)"
    ),
    ("PrioritySort", "queueSort"): "splitsched's queue always orders pods by priority, then age",
    ("DefaultBinder", "bind"): "splitsched's binder service always posts the pod's Binding",
}

#: (plugin, point, where it also runs): the point is part of how the plugin works here
#: and cannot be switched off alone while the plugin runs at the other point.
TIED: Mapping[tuple[str, str], tuple[str, str]] = {
    ("DefaultPreemption", "preEnqueue"): (
        "postFilter",
        "a preempting pod waits for its victims to go as part of preemption here",
    ),
    ("VolumeBinding", "preBind"): (
        "reserve",
        "the binder always writes the volumes VolumeBinding reserved before the Binding",
    ),
}

#: In-tree plugins splitsched does not run, and why (a notice when a profile names one).
NOT_RUN: Mapping[str, str] = {
    "NodeDeclaredFeatures": (
        "not implemented; it filters only pods that need a declared node feature"
    ),
    "GangScheduling": (
        "kube's alpha Workload gangs are not read; splitsched's gangs are the "
        "splitsched.io/group annotations"
    ),
    "TopologyPlacementGenerator": "kube's alpha pod-group placements are not supported",
    "PodGroupPodsCount": "kube's alpha pod-group placements are not supported",
}

#: Go interface names, for kube's wording of errors ("FilterPlugin \"X\" does not exist").
INTERFACE: Mapping[str, str] = {
    "preEnqueue": "PreEnqueuePlugin",
    "queueSort": "QueueSortPlugin",
    "preFilter": "PreFilterPlugin",
    "filter": "FilterPlugin",
    "postFilter": "PostFilterPlugin",
    "preScore": "PreScorePlugin",
    "score": "ScorePlugin",
    "reserve": "ReservePlugin",
    "permit": "PermitPlugin",
    "preBind": "PreBindPlugin",
    "bind": "BindPlugin",
    "postBind": "PostBindPlugin",
    "placementGenerate": "PlacementGeneratePlugin",
    "placementScore": "PlacementScorePlugin",
}
