"""The configuration kube-scheduler v1.36.3 prints as its default
(data/schedconfig/kube-scheduler-v1.36.3-default.yaml, see data/schedconfig/README.md)
loads unchanged and is splitsched's default profile, under kube's schedulerName; what it
sets that does not apply here is noted, each field once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from splitsched.core import framework, profiles
from splitsched.core.schedconfig import kubeplugins

DEFAULT = Path(__file__).parents[1] / "data" / "schedconfig" / "kube-scheduler-v1.36.3-default.yaml"


def layout(profile: framework.Profile) -> dict[str, list[object]]:
    """Plugin names per point, (name, weight) for score, and each plugin's args as built."""
    points = {
        attr: [p.name for p in getattr(profile, attr)]
        for attr in ("pre_filter", "filter", "post_filter", "pre_score", "reserve", "permit")
    }
    return {**points, "score": [(e.plugin.name, e.weight) for e in profile.score]}


def settings(profile: framework.Profile) -> dict[str, dict[str, object]]:
    """What each plugin instance was built with (its public attributes)."""
    out: dict[str, dict[str, object]] = {}
    plugins: list[Any] = [*profile.filter, *profile.post_filter, *(e.plugin for e in profile.score)]
    for plugin in plugins:
        attrs = {k: v for k, v in vars(plugin).items() if not k.startswith("_")}
        out[plugin.name] = {k: v.tolist() if hasattr(v, "tolist") else v for k, v in attrs.items()}
    return out


def test_kube_schedulers_default_configuration_is_our_default_profile() -> None:
    config = profiles.load_yaml(DEFAULT.read_text())
    assert list(config.profiles) == ["default-scheduler"]
    ours = profiles.load(None).profiles[profiles.DEFAULT_SCHEDULER_NAME]
    theirs = config.profiles["default-scheduler"]
    assert layout(theirs) == layout(ours)
    assert settings(theirs) == settings(ours)
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (1, 10)
    assert config.volume_bind_timeout_seconds == 600


def test_what_it_sets_that_does_not_apply_here_is_noted_once() -> None:
    notes = profiles.load_yaml(DEFAULT.read_text()).notes
    assert [n.split(": ", 1)[0] for n in notes] == [
        "clientConnection",
        "enableContentionProfiling",
        "enableProfiling",
        "leaderElection",
        "parallelism",
        "percentageOfNodesToScore",
        "profiles[0].plugins.multiPoint.enabled[19]",  # NodeDeclaredFeatures
    ]  # DynamicResources (enabled[14]) runs
    assert "NodeDeclaredFeatures is not run" in notes[6]


def test_its_multi_point_list_is_the_cores_table_of_kubes_defaults() -> None:
    """The binary's own list (weights it prints as 0 are unset) against kubeplugins'."""
    printed = yaml.safe_load(DEFAULT.read_text())["profiles"][0]["plugins"]["multiPoint"]
    assert tuple((p["name"], p["weight"] or None) for p in printed["enabled"]) == (
        kubeplugins.DEFAULT_MULTI_POINT
    )
