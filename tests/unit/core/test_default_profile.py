"""The default profile against kube-scheduler v1.36's: same plugins in the same order with
the same score weights, and a stated reason for every plugin of kube's that is not a
plugin here.

KUBE_V1_36 is kube's default multiPoint list as the core holds it
(`schedconfig.kubeplugins.DEFAULT_MULTI_POINT`), checked against the list the
kube-scheduler v1.36.3 binary itself prints by
tests/unit/core/schedconfig/test_kube_default.py.
"""

from __future__ import annotations

from splitsched.core import framework, profiles
from splitsched.core.plugins import REGISTRY
from splitsched.core.schedconfig import kubeplugins

KUBE_V1_36 = kubeplugins.DEFAULT_MULTI_POINT


def test_every_kube_default_plugin_is_ours_or_has_a_reason() -> None:
    """Each of kube's defaults is a plugin here, built into the pipeline (BUILT_IN, with
    why) or not run (NOT_RUN, with the notice's reason)."""
    ours = set(profiles.DEFAULT_PLUGINS)
    built_in = {name for name, _ in kubeplugins.BUILT_IN}
    explained = built_in | set(kubeplugins.NOT_RUN)
    missing = [n for n, _ in KUBE_V1_36 if n not in ours and n not in explained]
    assert not missing, f"kube default plugins neither in our profile nor explained: {missing}"
    kube = {n for n, _ in KUBE_V1_36}
    assert ours <= kube, f"not in kube's default profile: {sorted(ours - kube)}"
    # A reason goes stale once the plugin is registered: then it must be in the profile.
    stale = [n for n in explained if n in REGISTRY and n not in ours]
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
    profile = profiles.build_profile({})
    got = {e.plugin.name: e.weight for e in profile.score}
    want = {n: w for n, w in KUBE_V1_36 if w is not None and n in profiles.DEFAULT_PLUGINS}
    # DynamicResources scores allocations of ResourceClaims in kube; here (no DRA yet) only
    # its PostFilter runs, for kube's words in the message: it has nothing to score.
    assert want.pop("DynamicResources") == 2
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
