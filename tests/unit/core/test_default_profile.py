"""The default profile against kube-scheduler v1.36's: same plugins in the same order with
the same score weights, and a stated reason for every plugin of kube's that is not a
plugin here.

KUBE_V1_36 is `getDefaultPlugins` of k8s.io/kubernetes v1.36.3,
pkg/scheduler/apis/config/v1/default_plugins.go (multiPoint, in order, with weights),
after its `applyFeatureGates` with v1.36's defaults (pkg/features/kube_features.go):
DynamicResources (weight 2) goes before DefaultPreemption (DynamicResourceAllocation is
GA), NodeDeclaredFeatures (beta, on) is appended; GangScheduling and
TopologyAwareWorkloadScheduling are alpha (off).
"""

from __future__ import annotations

from splitsched.core import framework, profiles
from splitsched.core.plugins import REGISTRY

KUBE_V1_36: tuple[tuple[str, int | None], ...] = (
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

#: kube's default plugins that are not plugins of our default profile, and why.
NOT_A_PLUGIN_HERE = {
    "SchedulingGates": "PreEnqueue: the scheduler's state never queues a gated pod",
    "PrioritySort": "QueueSort: the scheduling queue orders by priority, then arrival",
    "DefaultBinder": "Bind: the binder service posts the Binding",
    "NodeDeclaredFeatures": (
        "not implemented: it filters only pods that need a declared node feature (hostNetwork "
        "with hostUsers: false, or a RestartAllContainers restart rule)"
    ),
}


def test_every_kube_default_plugin_is_ours_or_has_a_reason() -> None:
    ours = set(profiles.DEFAULT_PLUGINS)
    missing = [n for n, _ in KUBE_V1_36 if n not in ours and n not in NOT_A_PLUGIN_HERE]
    assert not missing, f"kube default plugins neither in our profile nor explained: {missing}"
    kube = {n for n, _ in KUBE_V1_36}
    assert ours <= kube, f"not in kube's default profile: {sorted(ours - kube)}"
    # A reason goes stale once the plugin is registered: then it must be in the profile.
    stale = [n for n in NOT_A_PLUGIN_HERE if n in REGISTRY and n not in ours]
    assert not stale, f"registered but left out of the default profile: {stale}"


def test_our_default_plugins_run_in_kubes_order() -> None:
    kube_order = [n for n, _ in KUBE_V1_36 if n in profiles.DEFAULT_PLUGINS]
    assert list(profiles.DEFAULT_PLUGINS) == kube_order
    profile = profiles.build_profile({})
    for point in ("filter", "pre_score", "post_filter"):
        names = [p.name for p in getattr(profile, point)]
        assert names == [n for n in kube_order if n in names], point
    assert [e.plugin.name for e in profile.score] == [
        n for n in kube_order if n in {e.plugin.name for e in profile.score}
    ]


def test_score_weights_are_kubes() -> None:
    """Of the plugins that score here: DynamicResources is in the profile for its
    PostFilter's words only (splitsched allocates no ResourceClaims), so it has no Score."""
    profile = profiles.build_profile({})
    got = {e.plugin.name: e.weight for e in profile.score}
    scored = {
        n for n in profiles.DEFAULT_PLUGINS if isinstance(REGISTRY[n]({}), framework.ScorePlugin)
    }
    want = {n: w for n, w in KUBE_V1_36 if w is not None and n in scored}
    assert got == want


def test_the_default_profile_scores_and_filters_with_every_plugin_that_can() -> None:
    """Each default plugin sits at every point it implements (so none is silently idle)."""
    profile = profiles.build_profile({})
    at_some_point = (
        {p.name for p in profile.filter}
        | {p.name for p in profile.post_filter}
        | {e.plugin.name for e in profile.score}
    )
    assert at_some_point == set(profiles.DEFAULT_PLUGINS)
    assert [p.name for p in profile.post_filter] == ["DynamicResources", "DefaultPreemption"]
    assert all(isinstance(e.plugin, framework.ScorePlugin) for e in profile.score)
