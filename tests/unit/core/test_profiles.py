"""Profiles from a KubeSchedulerConfiguration: which plugins run where, by kube-scheduler's
rules (multiPoint merged with the defaults, a point's own plugins first, `*`, score
weights), what cannot be honoured here refused naming the field, and the plugins built
once per profile with their args."""

from __future__ import annotations

from typing import Any, cast

import pytest

from splitsched.core import framework, profiles
from splitsched.core.plugins import REGISTRY
from splitsched.core.plugins.resources_fit import NodeResourcesFit
from splitsched.core.schedconfig import kubeplugins

Layout = dict[str, list[Any]]
BUILT_IN_BACK = [{"name": n} for n in ("SchedulingGates", "PrioritySort", "DefaultBinder")]


def layout(profile: framework.Profile) -> Layout:
    """Plugin names per extension point; (name, weight) for score."""
    return {
        "preFilter": [p.name for p in profile.pre_filter],
        "filter": [p.name for p in profile.filter],
        "postFilter": [p.name for p in profile.post_filter],
        "preScore": [p.name for p in profile.pre_score],
        "score": [(e.plugin.name, e.weight) for e in profile.score],
        "reserve": [p.name for p in profile.reserve],
        "permit": [p.name for p in profile.permit],
    }


def built(plugins: dict[str, Any]) -> Layout:
    return layout(profiles.build_profile({"plugins": plugins}))


DEFAULT = built({})


def test_disable_all_then_enable_some() -> None:
    spec = {
        "schedulerName": "lean",
        "plugins": {
            "multiPoint": {
                "disabled": [{"name": "*"}],
                "enabled": [*BUILT_IN_BACK, {"name": "NodeName"}],
            },
            "filter": {"enabled": [{"name": "NodeResourcesFit"}]},
            "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
        },
    }
    profile = profiles.build_profile(spec)
    got = layout(profile)
    assert profile.scheduler_name == "lean"
    assert got["filter"] == ["NodeName", "NodeResourcesFit"]
    assert got["score"] == [("NodeResourcesFit", 5)]
    assert got["preFilter"] == [] and got["postFilter"] == [] and got["preScore"] == []
    # one instance per plugin, whichever points it runs at
    assert profile.filter[1] is cast(object, profile.score[0].plugin)


def test_a_point_disable_drops_a_plugin_from_that_point_only() -> None:
    got = built({"filter": {"disabled": [{"name": "TaintToleration"}]}})
    assert "TaintToleration" not in got["filter"]
    assert "TaintToleration" in got["preScore"] and ("TaintToleration", 3) in got["score"]
    gone = built({"multiPoint": {"disabled": [{"name": "InterPodAffinity"}]}})
    assert all("InterPodAffinity" not in str(names) for names in gone.values())


def test_a_plugin_enabled_at_its_point_runs_first_there_with_its_weight() -> None:
    """kube's precedence: the point's own plugins first (a weight left out or 0 is 1, the
    default's 2 does not carry over), then the multiPoint ones in their order."""
    got = built({"score": {"enabled": [{"name": "ImageLocality", "weight": 5},
                                       {"name": "NodeAffinity", "weight": 0}]}})  # fmt: skip
    assert got["score"][:2] == [("ImageLocality", 5), ("NodeAffinity", 1)]
    assert got["score"][2:] == [
        e for e in DEFAULT["score"] if e[0] not in ("ImageLocality", "NodeAffinity")
    ]
    assert got["filter"] == DEFAULT["filter"]


def test_a_multi_point_weight_replaces_the_default_in_place() -> None:
    got = built({"multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 7}]}})
    assert got["score"] == [(n, 7 if n == "NodeResourcesFit" else w) for n, w in DEFAULT["score"]]
    assert got["filter"] == DEFAULT["filter"]


def test_star_at_a_point_keeps_only_its_own_plugins() -> None:
    got = built({"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeAffinity"}]}})
    assert got["score"] == [("NodeAffinity", 1)]
    # preScore still runs its multiPoint plugins: kube does not tie it to score
    assert got["preScore"] == DEFAULT["preScore"][:-1]  # less ImageLocality's (ours only)


def test_our_pre_score_of_image_locality_follows_its_score() -> None:
    """ImageLocality pre-scores here (to skip pods without images on any node); kube's has
    no PreScore, so it runs wherever its Score runs."""
    assert "ImageLocality" in DEFAULT["preScore"]
    gone = built({"score": {"disabled": [{"name": "ImageLocality"}]}})
    assert "ImageLocality" not in gone["preScore"]


def test_built_in_plugins_may_be_named_where_kube_runs_them() -> None:
    got = built({"queueSort": {"enabled": [{"name": "PrioritySort"}], "disabled": [{"name": "*"}]},
                 "bind": {"enabled": [{"name": "DefaultBinder"}], "disabled": [{"name": "*"}]},
                 "preBind": {"enabled": [{"name": "VolumeBinding"}]}})  # fmt: skip
    assert got == DEFAULT


def test_without_preemption_the_pre_enqueue_of_default_preemption_may_go() -> None:
    got = built({"multiPoint": {"disabled": [{"name": "DefaultPreemption"}]}})
    assert got["postFilter"] == ["DynamicResources"]
    with pytest.raises(profiles.ProfileError, match=r"preEnqueue.disabled\[0\]: DefaultPreemption"):
        built({"preEnqueue": {"disabled": [{"name": "DefaultPreemption"}]}})


def test_plugins_not_run_here_and_names_that_disable_nothing_are_noted() -> None:
    config = profiles.load({"profiles": [{"plugins": {
        "filter": {"enabled": [{"name": "NodeDeclaredFeatures"}],
                   "disabled": [{"name": "NodeResourcesLeastAllocated"}]}}}]})  # fmt: skip
    assert config.notes == (
        "profiles[0].plugins.filter.enabled[0]: NodeDeclaredFeatures is not run: not "
        "implemented; it filters only pods that need a declared node feature",
        "profiles[0].plugins.filter.disabled[0]: disables nothing: kube-scheduler has no plugin "
        '"NodeResourcesLeastAllocated"',
    )
    assert layout(config.profiles["splitsched"]) == DEFAULT
    assert profiles.load(None).notes == ()  # the default profile names none of them


BAD: list[tuple[dict[str, Any], str]] = [
    (
        {"plugins": {"multiPoint": {"enabled": [{"name": "NodeName"}, {"name": "NodeName"}]}}},
        # kube: the last of the two replaces the default in place, the first is appended
        'profiles[0].plugins.multiPoint.enabled[0]: plugin "NodeName" already registered as '
        '"FilterPlugin"',
    ),
    (
        {"plugins": {"filter": {"enabled": [{"name": "NodeName"}, {"name": "NodeName"}]}}},
        'profiles[0].plugins.filter.enabled[1]: plugin "NodeName" already registered as '
        '"FilterPlugin"',
    ),
    (
        {"plugins": {"postBind": {"enabled": [{"name": "NodeName"}]}}},
        'profiles[0].plugins.postBind.enabled[0]: plugin "NodeName" does not extend '
        "PostBindPlugin plugin",
    ),
    (
        {"plugins": {"multiPoint": {"enabled": [{"name": "Nope"}]}}},
        'profiles[0].plugins.multiPoint.enabled[0]: plugin "Nope" does not exist',
    ),
    (
        {"plugins": {"multiPoint": {"disabled": [{"name": "*"}]}}},
        "profiles[0].plugins.multiPoint.disabled[0]: SchedulingGates cannot be left out of "
        "preEnqueue",
    ),
    (
        {"plugins": {"reserve": {"enabled": [{"name": "VolumeBinding"}]},
                     "preBind": {"disabled": [{"name": "VolumeBinding"}]}}},
        "profiles[0].plugins.preBind.disabled[0]: VolumeBinding cannot be left out of preBind "
        "while it runs at reserve",
    ),
    (
        {"pluginConfig": [{"name": "NodeResourcesFit",
                           "args": {"scoringStrategy": {"type": "Bogus"}}}]},
        'profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Bogus"',
    ),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "message"), BAD)
def test_bad_profiles_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(profiles.ProfileError) as info:
        profiles.build_profile(spec)
    assert str(info.value).startswith(message)


def test_queue_sort_sets_compare_as_kube_compares_them() -> None:
    """One queue for all profiles: their queueSort sets must be alike (an empty list is
    no list, an unset weight is 0), else the second is refused."""
    alike = {"plugins": {"queueSort": {"enabled": [{"name": "PrioritySort", "weight": 0}]}}}
    same = {"plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}], "disabled": []}}}
    profiles.load({"profiles": [{"schedulerName": "a", **alike}, {"schedulerName": "b", **same}]})
    profiles.load({"profiles": [{"schedulerName": "a", "plugins": {"queueSort": {"enabled": []}}},
                                {"schedulerName": "b"}]})  # fmt: skip
    with pytest.raises(profiles.ProfileError, match=r"^profiles\[1\].plugins.queueSort"):
        profiles.load({"profiles": [{"schedulerName": "a", **alike}, {"schedulerName": "b"}]})


def test_plugin_config_reaches_the_plugin() -> None:
    spec = {
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {"ignoredResources": ["example.com/gpu"]},
            }
        ]
    }
    fit = next(p for p in profiles.build_profile(spec).filter if p.name == "NodeResourcesFit")
    assert isinstance(fit, NodeResourcesFit)
    assert fit.ignored_resources == {"example.com/gpu"}


def test_load_profiles_keys_by_scheduler_name() -> None:
    loaded = profiles.load_profiles_yaml(
        "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins: {score: {}}\n"
    )
    assert list(loaded) == ["a", "b"]
    assert list(profiles.load_profiles(None)) == [profiles.DEFAULT_SCHEDULER_NAME]
    with pytest.raises(profiles.ProfileError, match=r"^profiles\[1\].schedulerName: duplicate"):
        profiles.load_profiles({"profiles": [{}, {}]})
    with pytest.raises(profiles.ProfileError, match="not valid YAML"):
        profiles.load_profiles_yaml("profiles: [")


def test_our_plugins_implement_the_points_kube_scheduler_gives_them() -> None:
    """Each plugin of the registry implements, of the points splitsched runs as lists,
    those kube's does; the exceptions are equivalent here, and said why."""
    exceptions = {
        # kube's Score of VolumeBinding runs only with the StorageCapacityScoring gate (off).
        ("VolumeBinding", "preScore"): "kube only", ("VolumeBinding", "score"): "kube only",
        # ours pre-scores to skip pods whose images no node has (it follows its Score).
        ("ImageLocality", "preScore"): "ours only",
        # kube's Score of DynamicResources is not modelled yet: every node where the
        # claims fit scores the same here
        ("DynamicResources", "score"): "kube only",
    }  # fmt: skip
    protocols = {
        "preFilter": framework.PreFilterPlugin, "filter": framework.FilterPlugin,
        "postFilter": framework.PostFilterPlugin, "preScore": framework.PreScorePlugin,
        "score": framework.ScorePlugin, "reserve": framework.ReservePlugin,
        "permit": framework.PermitPlugin,
    }  # fmt: skip
    differences = {}
    for name, factory in REGISTRY.items():
        plugin = factory({})
        for point, proto in protocols.items():
            ours, kubes = isinstance(plugin, proto), point in kubeplugins.POINTS_OF[name]
            if ours != kubes:
                differences[(name, point)] = "ours only" if ours else "kube only"
    assert differences == exceptions
    assert set(REGISTRY) | set(kubeplugins.NOT_RUN) | {p for p, _ in kubeplugins.BUILT_IN} == set(
        kubeplugins.POINTS_OF
    )


def test_pods_without_volumes_run_the_profile_less_the_volume_plugins() -> None:
    """The four volume plugins and DynamicResources SKIP a pod without volumes or claims
    at PreFilter and Reserve; the profile such a pod runs leaves them out, so they cost it
    nothing (DynamicResources' PostFilter words stay)."""
    profile = profiles.build_profile({})
    lean = profile.without_volume_plugins()
    volume_plugins = {"VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone",
                      "DynamicResources"}  # fmt: skip
    assert {p.name for p in profile.filter} - {p.name for p in lean.filter} == volume_plugins
    assert not {p.name for p in lean.pre_filter} & volume_plugins
    assert lean.reserve == [] and lean.score is profile.score
    assert "DynamicResources" in {p.name for p in lean.post_filter}
    assert profile.without_volume_plugins() is lean  # built once ...
    profile.reserve.append(NodeResourcesFit({}))  # type: ignore[arg-type]
    rebuilt = profile.without_volume_plugins()  # ... and again when a list changes
    assert rebuilt is not lean and len(rebuilt.reserve) == 1
