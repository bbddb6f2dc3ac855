"""Profiles from KubeSchedulerConfiguration-shaped YAML: which plugins run where, and
errors that name the field."""

from __future__ import annotations

from typing import Any, cast

import pytest

from splitsched.core import framework, profiles
from splitsched.core.plugins.resources_fit import NodeResourcesFit

Layout = dict[str, list[Any]]


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


def test_disable_all_then_enable_some() -> None:
    spec = {
        "schedulerName": "lean",
        "plugins": {
            "multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeName"}]},
            "filter": {"enabled": [{"name": "NodeResourcesFit"}]},
            "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
        },
    }
    profile = profiles.build_profile(spec)
    got = layout(profile)
    assert profile.scheduler_name == "lean"
    assert got["filter"] == ["NodeName", "NodeResourcesFit"]
    assert got["score"] == [("NodeResourcesFit", 5)]
    assert got["preFilter"] == [] and got["postFilter"] == []
    # one instance per plugin, whichever points it runs at
    assert profile.filter[1] is cast(object, profile.score[0].plugin)


def test_point_disable_and_zero_weight_drop_a_plugin_from_that_point_only() -> None:
    spec = {
        "plugins": {
            "filter": {"disabled": [{"name": "TaintToleration"}]},
            "score": {"enabled": [{"name": "NodeAffinity", "weight": 0}]},
            "multiPoint": {"disabled": [{"name": "InterPodAffinity"}]},
        }
    }
    got = layout(profiles.build_profile(spec))
    assert "TaintToleration" not in got["filter"] and "TaintToleration" in got["preScore"]
    assert "InterPodAffinity" not in got["filter"] + got["preFilter"] + got["preScore"]
    # a plugin already chosen from the defaults keeps its default weight
    assert ("NodeAffinity", 2) in got["score"]
    only_zero = {
        "plugins": {
            "multiPoint": {"disabled": [{"name": "*"}]},
            "score": {"enabled": [{"name": "NodeAffinity", "weight": 0}]},
        }
    }
    assert layout(profiles.build_profile(only_zero))["score"] == []


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


BAD: list[tuple[dict[str, Any], str]] = [
    ({"schedulerName": ""}, "profiles[0].schedulerName: must be a non-empty string"),
    ({"pluginConfig": [{"args": {}}]}, "profiles[0].pluginConfig[0]: needs a string 'name'"),
    (
        {"pluginConfig": [{"name": "NodeName", "args": [1]}]},
        "profiles[0].pluginConfig[0].args: must be a mapping",
    ),
    ({"plugins": [1]}, "profiles[0].plugins: must be a mapping"),
    ({"plugins": {"sideways": {}}}, "profiles[0].plugins.sideways: unknown extension point"),
    ({"plugins": {"filter": [1]}}, "profiles[0].plugins.filter: must be a mapping"),
    (
        {"plugins": {"filter": {"enabled": {"name": "NodeName"}}}},
        "profiles[0].plugins.filter.enabled: expected a list of {name: ...} entries",
    ),
    (
        {"plugins": {"filter": {"disabled": [{"name": 3}]}}},
        "profiles[0].plugins.filter.disabled[0]: each entry needs a string 'name'",
    ),
    (
        {"plugins": {"score": {"enabled": [{"name": "NodeName", "weight": -1}]}}},
        "profiles[0].plugins.score.enabled[0].weight: must be a non-negative integer",
    ),
    (
        {"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}},
        "profiles[0].plugins.filter: unknown plugin 'Nope' (known: DefaultPreemption,",
    ),
    (
        {
            "plugins": {
                "multiPoint": {"disabled": [{"name": "*"}]},
                "score": {"enabled": [{"name": "NodeUnschedulable"}]},
            }
        },
        "profiles[0].plugins.score: plugin 'NodeUnschedulable' has no score point",
    ),
    (
        {
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Bogus"}}}
            ]
        },
        "profiles[0].pluginConfig[NodeResourcesFit]: scoringStrategy.type: 'Bogus' is not",
    ),
]


@pytest.mark.parametrize(("spec", "message"), BAD)
def test_bad_profiles_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(profiles.ProfileError) as info:
        profiles.build_profile(spec)
    assert str(info.value).startswith(message)


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


def test_pods_without_volumes_run_the_profile_less_the_volume_plugins() -> None:
    """The four volume plugins SKIP a pod without volumes at PreFilter and Reserve; the
    profile such a pod runs leaves them out, so they cost it nothing."""
    profile = profiles.build_profile({})
    lean = profile.without_volume_plugins()
    volume_plugins = {"VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"}
    assert {p.name for p in profile.filter} - {p.name for p in lean.filter} == volume_plugins
    assert not {p.name for p in lean.pre_filter} & volume_plugins
    assert lean.reserve == [] and lean.score is profile.score
    assert profile.without_volume_plugins() is lean  # built once ...
    profile.reserve.append(NodeResourcesFit({}))  # type: ignore[arg-type]
    rebuilt = profile.without_volume_plugins()  # ... and again when a list changes
    assert rebuilt is not lean and len(rebuilt.reserve) == 1
