"""The args of each plugin in a profile's pluginConfig, strictly, as kube-scheduler v1.36
decodes them (k8s.io/kube-scheduler/config/v1 types_pluginargs.go, and the core/v1 types
they embed: NodeAffinity, TopologySpreadConstraint).

`check_args` types one pluginConfig entry's args: unknown fields go to the walk's
findings (kube's strict decoding error), a wrong `kind` or `apiVersion` is refused as
kube refuses it, and a plugin kube has no args type for takes none (kube would silently
ignore them). The values are judged by the plugins themselves, when `profiles` builds
them. Called by `schedconfig.document`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from splitsched.core.schedconfig import kubeplugins as kp
from splitsched.core.schedconfig import v1
from splitsched.core.schedconfig.schema import (
    BOOLEAN,
    DURATION,
    INTEGER,
    STRING,
    STRINGS,
    Findings,
    ListOf,
    MapOf,
    SchedulerConfigError,
    Struct,
    check,
)

_TYPE_META = {"apiVersion": STRING, "kind": STRING}

_LABEL_SELECTOR = Struct(
    "LabelSelector",
    {
        "matchLabels": MapOf(STRING),
        "matchExpressions": ListOf(
            Struct(
                "LabelSelectorRequirement",
                {"key": STRING, "operator": STRING, "values": STRINGS},
            )
        ),
    },
)
_NODE_SELECTOR_REQUIREMENT = Struct(
    "NodeSelectorRequirement", {"key": STRING, "operator": STRING, "values": STRINGS}
)
_NODE_SELECTOR_TERM = Struct(
    "NodeSelectorTerm",
    {
        "matchExpressions": ListOf(_NODE_SELECTOR_REQUIREMENT),
        "matchFields": ListOf(_NODE_SELECTOR_REQUIREMENT),
    },
)
_NODE_AFFINITY = Struct(
    "NodeAffinity",
    {
        "requiredDuringSchedulingIgnoredDuringExecution": Struct(
            "NodeSelector", {"nodeSelectorTerms": ListOf(_NODE_SELECTOR_TERM)}
        ),
        "preferredDuringSchedulingIgnoredDuringExecution": ListOf(
            Struct(
                "PreferredSchedulingTerm", {"weight": INTEGER, "preference": _NODE_SELECTOR_TERM}
            )
        ),
    },
)
_SPREAD_CONSTRAINT = Struct(
    "TopologySpreadConstraint",
    {
        "maxSkew": INTEGER,
        "topologyKey": STRING,
        "whenUnsatisfiable": STRING,
        "labelSelector": _LABEL_SELECTOR,
        "minDomains": INTEGER,
        "nodeAffinityPolicy": STRING,
        "nodeTaintsPolicy": STRING,
        "matchLabelKeys": STRINGS,
    },
    notes={
        "matchLabelKeys": (
            "no effect: a default constraint's selector is the pod's owner's (in "
            "kube-scheduler too)"
        )
    },
)
_RESOURCES = ListOf(Struct("ResourceSpec", {"name": STRING, "weight": INTEGER}))
_SHAPE = ListOf(Struct("UtilizationShapePoint", {"utilization": INTEGER, "score": INTEGER}))

#: Each plugin's args type, by plugin name (kube's `<Name>Args` kinds).
ARGS: Mapping[str, Struct] = {
    "DefaultPreemption": Struct(
        "DefaultPreemptionArgs",
        {
            **_TYPE_META,
            "minCandidateNodesPercentage": INTEGER,
            "minCandidateNodesAbsolute": INTEGER,
        },
    ),
    "InterPodAffinity": Struct(
        "InterPodAffinityArgs",
        {
            **_TYPE_META,
            "hardPodAffinityWeight": INTEGER,
            "ignorePreferredTermsOfExistingPods": BOOLEAN,
        },
    ),
    "NodeResourcesFit": Struct(
        "NodeResourcesFitArgs",
        {
            **_TYPE_META,
            "ignoredResources": STRINGS,
            "ignoredResourceGroups": STRINGS,
            "scoringStrategy": Struct(
                "ScoringStrategy",
                {
                    "type": STRING,
                    "resources": _RESOURCES,
                    "requestedToCapacityRatio": Struct(
                        "RequestedToCapacityRatioParam", {"shape": _SHAPE}
                    ),
                },
            ),
        },
    ),
    "PodTopologySpread": Struct(
        "PodTopologySpreadArgs",
        {**_TYPE_META, "defaultConstraints": ListOf(_SPREAD_CONSTRAINT), "defaultingType": STRING},
    ),
    "NodeResourcesBalancedAllocation": Struct(
        "NodeResourcesBalancedAllocationArgs", {**_TYPE_META, "resources": _RESOURCES}
    ),
    "VolumeBinding": Struct(
        "VolumeBindingArgs", {**_TYPE_META, "bindTimeoutSeconds": INTEGER, "shape": _SHAPE}
    ),
    "NodeAffinity": Struct("NodeAffinityArgs", {**_TYPE_META, "addedAffinity": _NODE_AFFINITY}),
    "DynamicResources": Struct(
        "DynamicResourcesArgs",
        {**_TYPE_META, "filterTimeout": DURATION, "bindingTimeout": DURATION},
    ),
    # splitsched's own (kubeplugins.SPLITSCHED_ONLY)
    "DevicePacking": Struct("DevicePackingArgs", {**_TYPE_META, "topologyAttributes": STRINGS}),
}


def check_args(name: str, args: Any, path: str, found: Findings) -> None:
    """Type one pluginConfig entry (`path` is `profiles[i].pluginConfig[j]`)."""
    if name not in kp.POINTS_OF:
        raise SchedulerConfigError(
            f'{path}.name: kube-scheduler v1.36 has no plugin "{name}" (splitsched runs its '
            "in-tree plugins only, and its own DevicePacking)"
        )
    if args is None:
        return
    if not isinstance(args, Mapping):
        raise SchedulerConfigError(f"{path}.args: expected a mapping, got {args!r}")
    spec = ARGS.get(name)
    if spec is None:
        if args:
            raise SchedulerConfigError(f"{path}.args: {name} takes no args")
        return
    _check_type_meta(name, spec, args, path)
    check(args, spec, f"{path}.args", found)


def _check_type_meta(name: str, spec: Struct, args: Mapping[str, Any], path: str) -> None:
    """An args `kind`/`apiVersion`, when given, must be the plugin's (as kube decodes)."""
    version, kind = args.get("apiVersion"), args.get("kind")
    if version is not None and version != v1.API_VERSION:
        raise SchedulerConfigError(
            f"{path}.args.apiVersion: expected {v1.API_VERSION}, got {version!r}"
        )
    if kind is not None and kind != spec.name:
        raise SchedulerConfigError(
            f"{path}.args: args for plugin {name} were not of type "
            f"{spec.name}.kubescheduler.config.k8s.io, got {kind}.kubescheduler.config.k8s.io"
        )
