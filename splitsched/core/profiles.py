"""Profiles from configuration: which plugins run at each extension point, per schedulerName.

The YAML mirrors KubeSchedulerConfiguration's `profiles` so a kube-scheduler user can read
it: per profile a `schedulerName`, `plugins.<point>.enabled/disabled` (a `*` disables all
defaults) and `pluginConfig` args. Called by the scheduler service and `splitsched
simulate` to build the framework; unknown plugin names or malformed entries raise
ProfileError naming the offending field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from splitsched.core import framework
from splitsched.core.plugins import REGISTRY

DEFAULT_SCHEDULER_NAME = "splitsched"

# kube-scheduler v1.36's default plugin order (filters cheapest-first; the first filter to
# reject a node names it in the message) and score weights, less what is not a plugin here
# (tests/unit/core/test_default_profile.py holds kube's table and says why for each).
DEFAULT_PLUGINS: tuple[str, ...] = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",  # its PostFilter's words only: splitsched allocates no claims
    "DefaultPreemption",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
)
DEFAULT_SCORE_WEIGHTS: Mapping[str, int] = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesFit": 1,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}
EXTENSION_POINTS = ("preFilter", "filter", "postFilter", "preScore", "score", "reserve", "permit")
_PROTOCOLS: Mapping[str, type] = {
    "preFilter": framework.PreFilterPlugin,
    "filter": framework.FilterPlugin,
    "postFilter": framework.PostFilterPlugin,
    "preScore": framework.PreScorePlugin,
    "score": framework.ScorePlugin,
    "reserve": framework.ReservePlugin,
    "permit": framework.PermitPlugin,
}


class ProfileError(ValueError):
    """A scheduler configuration that cannot be used; the message names the field."""


def _names(entries: Any, where: str) -> list[tuple[str, int | None]]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ProfileError(f"{where}: expected a list of {{name: ...}} entries")
    out: list[tuple[str, int | None]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ProfileError(f"{where}[{i}]: each entry needs a string 'name'")
        weight = entry.get("weight")
        if weight is not None and (not isinstance(weight, int) or weight < 0):
            raise ProfileError(f"{where}[{i}].weight: must be a non-negative integer")
        out.append((entry["name"], weight))
    return out


def build_profile(spec: Mapping[str, Any], *, where: str = "profiles[0]") -> framework.Profile:
    """One profile from its config mapping (see module docstring). Each extension point
    runs the multiPoint set (`_multi_point`) adjusted by the point's own enabled/disabled
    lists (`_chosen`), keeping the plugins that implement the point; a plugin enabled
    explicitly at a point it lacks is an error."""
    name = spec.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    if not isinstance(name, str) or not name:
        raise ProfileError(f"{where}.schedulerName: must be a non-empty string")
    instances = _Instances(_plugin_args(spec, where), where)
    plugins_cfg = _plugins_config(spec, where)
    base = _multi_point(plugins_cfg, where)
    profile = framework.Profile(scheduler_name=name)
    for point in EXTENSION_POINTS:
        proto = _PROTOCOLS[point]
        for plugin_name, weight, explicit in _chosen(plugins_cfg, point, base, where):
            obj = instances.get(plugin_name, f"{where}.plugins.{point}")
            if not isinstance(obj, proto):
                if explicit:
                    raise ProfileError(
                        f"{where}.plugins.{point}: plugin {plugin_name!r} has no {point} point"
                    )
                continue
            if point == "score":
                w = weight if weight is not None else DEFAULT_SCORE_WEIGHTS.get(plugin_name, 1)
                if w:
                    profile.score.append(framework.ScoreEntry(obj, w))  # type: ignore[arg-type]
            else:
                getattr(profile, _attr(point)).append(obj)
    return profile


def _plugin_args(spec: Mapping[str, Any], where: str) -> dict[str, Mapping[str, Any]]:
    """pluginConfig: each plugin's args by plugin name."""
    plugin_args: dict[str, Mapping[str, Any]] = {}
    for i, pc in enumerate(spec.get("pluginConfig") or []):
        if not isinstance(pc, Mapping) or not isinstance(pc.get("name"), str):
            raise ProfileError(f"{where}.pluginConfig[{i}]: needs a string 'name'")
        args = pc.get("args") or {}
        if not isinstance(args, Mapping):
            raise ProfileError(f"{where}.pluginConfig[{i}].args: must be a mapping")
        plugin_args[pc["name"]] = args
    return plugin_args


def _plugins_config(spec: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """plugins: a mapping whose keys are extension points (or multiPoint)."""
    plugins_cfg = spec.get("plugins") or {}
    if not isinstance(plugins_cfg, Mapping):
        raise ProfileError(f"{where}.plugins: must be a mapping")
    for point in plugins_cfg:
        if point not in (*EXTENSION_POINTS, "multiPoint"):
            raise ProfileError(f"{where}.plugins.{point}: unknown extension point")
    return plugins_cfg


class _Instances:
    """One instance per plugin name for the whole profile, built on first use with its
    pluginConfig args, so a plugin at several points shares its state."""

    def __init__(self, plugin_args: Mapping[str, Mapping[str, Any]], where: str) -> None:
        self._args = plugin_args
        self._where = where
        self._built: dict[str, object] = {}

    def get(self, plugin_name: str, field_path: str) -> object:
        if plugin_name not in self._built:
            factory = REGISTRY.get(plugin_name)
            if factory is None:
                known = ", ".join(sorted(REGISTRY))
                raise ProfileError(f"{field_path}: unknown plugin {plugin_name!r} (known: {known})")
            try:
                self._built[plugin_name] = factory(self._args.get(plugin_name, {}))
            except (TypeError, ValueError, KeyError) as exc:
                raise ProfileError(f"{self._where}.pluginConfig[{plugin_name}]: {exc}") from exc
        return self._built[plugin_name]


def _multi_point(plugins_cfg: Mapping[str, Any], where: str) -> list[tuple[str, int | None]]:
    """The plugins every point starts from: the defaults less multiPoint's disabled ones
    (all of them for `*`), then multiPoint's enabled ones."""
    multi = plugins_cfg.get("multiPoint") or {}
    multi_disabled = {n for n, _ in _names(multi.get("disabled"), f"{where}.plugins.multiPoint")}
    multi_enabled = _names(multi.get("enabled"), f"{where}.plugins.multiPoint.enabled")
    base: list[tuple[str, int | None]] = (
        []
        if "*" in multi_disabled
        else [(n, None) for n in DEFAULT_PLUGINS if n not in multi_disabled]
    )
    base += [e for e in multi_enabled if e[0] not in {b[0] for b in base}]
    return base


def _chosen(
    plugins_cfg: Mapping[str, Any],
    point: str,
    base: list[tuple[str, int | None]],
    where: str,
) -> list[tuple[str, int | None, bool]]:
    """(name, weight, explicitly enabled) of the plugins configured at one point: `base`
    less the point's disabled ones (all for `*`), then the point's enabled ones."""
    cfg = plugins_cfg.get(point) or {}
    if not isinstance(cfg, Mapping):
        raise ProfileError(f"{where}.plugins.{point}: must be a mapping")
    disabled = {n for n, _ in _names(cfg.get("disabled"), f"{where}.plugins.{point}.disabled")}
    enabled = _names(cfg.get("enabled"), f"{where}.plugins.{point}.enabled")
    chosen: list[tuple[str, int | None, bool]] = []
    if "*" not in disabled:
        chosen = [(n, w, False) for n, w in base if n not in disabled]
    chosen += [(n, w, True) for n, w in enabled if n not in {c[0] for c in chosen}]
    return chosen


def _attr(point: str) -> str:
    return {"preFilter": "pre_filter", "postFilter": "post_filter", "preScore": "pre_score"}.get(
        point, point
    )


def load_profiles(config: Mapping[str, Any] | None) -> dict[str, framework.Profile]:
    """All profiles of a config mapping, keyed by schedulerName; the default profile when
    the config is empty."""
    specs: Sequence[Any] = (config or {}).get("profiles") or [{}]
    if not isinstance(specs, list):
        raise ProfileError("profiles: expected a list")
    out: dict[str, framework.Profile] = {}
    for i, spec in enumerate(specs):
        if not isinstance(spec, Mapping):
            raise ProfileError(f"profiles[{i}]: expected a mapping")
        profile = build_profile(spec, where=f"profiles[{i}]")
        if profile.scheduler_name in out:
            raise ProfileError(f"profiles[{i}].schedulerName: duplicate {profile.scheduler_name!r}")
        out[profile.scheduler_name] = profile
    return out


def load_profiles_yaml(text: str) -> dict[str, framework.Profile]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(f"scheduler config is not valid YAML: {exc}") from exc
    if data is not None and not isinstance(data, Mapping):
        raise ProfileError("scheduler config: expected a mapping at the top level")
    return load_profiles(data)
