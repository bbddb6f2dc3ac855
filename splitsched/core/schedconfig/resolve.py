"""Which plugins run at each extension point of a profile, by kube-scheduler's rules.

`resolve` takes a profile's `plugins` section (already type-checked) and answers as
kube-scheduler v1.36 does: the default multiPoint set merged with the configured one (a
configured plugin replaces a default in place, with its weight; `*` disables all
defaults), then per point the plugins enabled there (which run first if they are also
multiPoint plugins, else last), then the multiPoint plugins that implement the point
and are not disabled there (`*` at a point keeps only its own enabled ones). Score
weights come from the score section first, then multiPoint; 0 or unset means 1. Errors
use kube's words ("FilterPlugin \"X\" does not exist") after the field's path.

Then what splitsched cannot honour is refused (`kubeplugins.BUILT_IN`, `TIED`), and
what it does not run is noted. Pure; called by `splitsched.core.profiles`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from splitsched.core.schedconfig import kubeplugins as kp
from splitsched.core.schedconfig.schema import SchedulerConfigError

_OUT_OF_TREE = (
    "splitsched runs kube-scheduler v1.36's in-tree plugins only (and its own DevicePacking)"
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One `{name, weight}` of a plugin set, with the field it came from ("" = default)."""

    name: str
    weight: int
    path: str


@dataclass(frozen=True, slots=True)
class Resolved:
    """A profile's plugins: names per point in run order, score weights, and notes."""

    points: Mapping[str, tuple[str, ...]]
    weights: Mapping[str, int]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Set:
    enabled: tuple[Entry, ...]
    disabled: tuple[Entry, ...]

    def disables(self, name: str) -> Entry | None:
        return next((d for d in self.disabled if d.name in (name, "*")), None)


def resolve(plugins: Mapping[str, Any] | None, where: str, scheduler_name: str) -> Resolved:
    """See the module docstring; `where` is the profile's path (`profiles[0]`)."""
    sets = {key: _plugin_set(plugins or {}, key, where) for key in (*kp.POINTS, kp.MULTI_POINT)}
    notes = _check_names(sets)
    multi = _merge_multi_point(sets[kp.MULTI_POINT])
    points = {point: _at_point(point, sets[point], multi) for point in kp.POINTS}
    _check_built_in(points, sets, where, scheduler_name)
    weights = _score_weights([*sets["score"].enabled, *multi])
    return Resolved(points=points, weights=weights, notes=tuple(notes))


def _plugin_set(plugins: Mapping[str, Any], key: str, where: str) -> _Set:
    raw = plugins.get(key) or {}
    path = f"{where}.plugins.{key}"
    return _Set(
        enabled=tuple(_entries(raw.get("enabled"), f"{path}.enabled")),
        disabled=tuple(_entries(raw.get("disabled"), f"{path}.disabled")),
    )


def _entries(raw: Sequence[Mapping[str, Any]] | None, path: str) -> list[Entry]:
    out: list[Entry] = []
    for i, item in enumerate(raw or ()):
        name, weight = item.get("name"), item.get("weight") or 0
        if not name:
            raise SchedulerConfigError(f"{path}[{i}].name: Required value")
        if weight < 0:
            raise SchedulerConfigError(f"{path}[{i}].weight: must not be negative, got {weight}")
        out.append(Entry(name=name, weight=weight, path=f"{path}[{i}]"))
    return out


def _check_names(sets: Mapping[str, _Set]) -> list[str]:
    """Enabled plugins must be kube's in-tree ones; a disabled name that is none disables
    nothing (kube says nothing), and a plugin splitsched does not run is noted."""
    notes: list[str] = []
    for key, plugin_set in sets.items():
        for e in plugin_set.enabled:
            if e.name not in kp.POINTS_OF:
                iface = kp.INTERFACE.get(key, "plugin")
                raise SchedulerConfigError(
                    f'{e.path}: {iface} "{e.name}" does not exist; {_OUT_OF_TREE}'
                )
            if e.name in kp.NOT_RUN:
                notes.append(f"{e.path}: {e.name} is not run: {kp.NOT_RUN[e.name]}")
        for d in plugin_set.disabled:
            if d.name != "*" and d.name not in kp.POINTS_OF:
                notes.append(f'{d.path}: disables nothing: kube-scheduler has no plugin "{d.name}"')
    return notes


def _merge_multi_point(custom: _Set) -> list[Entry]:
    """kube's mergePluginSet of its default multiPoint set with the configured one."""
    last = {e.name: i for i, e in enumerate(custom.enabled)}  # the last one replaces a default
    disabled = {d.name for d in custom.disabled}
    replaced: set[int] = set()
    merged: list[Entry] = []
    if "*" not in disabled:
        for name, weight in kp.DEFAULT_MULTI_POINT:
            if name in disabled:
                continue
            i = last.get(name)
            if i is None:
                merged.append(Entry(name=name, weight=weight or 0, path=""))
            else:
                replaced.add(i)
                merged.append(custom.enabled[i])
    merged += [e for i, e in enumerate(custom.enabled) if i not in replaced]
    return merged


def _at_point(point: str, own: _Set, multi: Sequence[Entry]) -> tuple[str, ...]:
    """kube's updatePluginList then expandMultiPointPlugins, for one point."""
    iface = kp.INTERFACE[point]
    explicit: list[str] = []
    for e in own.enabled:
        if point not in kp.POINTS_OF[e.name]:
            raise SchedulerConfigError(
                f'{e.path}: plugin "{e.name}" does not extend {iface} plugin'
            )
        if e.name in explicit:
            raise SchedulerConfigError(
                f'{e.path}: plugin "{e.name}" already registered as "{iface}"'
            )
        explicit.append(e.name)
    if any(d.name == "*" for d in own.disabled):
        return tuple(explicit)
    disabled = {d.name for d in own.disabled}
    overrides: list[str] = []
    expanded: list[str] = []
    for e in multi:
        if point not in kp.POINTS_OF[e.name] or e.name in disabled:
            continue
        if e.name in explicit:
            overrides.append(e.name)
            continue
        if e.name in expanded:
            raise SchedulerConfigError(
                f'{e.path}: plugin "{e.name}" already registered as "{iface}"'
            )
        expanded.append(e.name)
    first = [n for n in explicit if n in overrides]
    return (*first, *expanded, *[n for n in explicit if n not in overrides])


def _score_weights(entries: Sequence[Entry]) -> dict[str, int]:
    """kube's getValidScoreWeights: the first entry of a score plugin wins; 0 means 1."""
    weights: dict[str, int] = {}
    for e in entries:
        if "score" in kp.POINTS_OF[e.name] and e.name not in weights:
            weights[e.name] = e.weight or 1
    return weights


def _check_built_in(
    points: Mapping[str, tuple[str, ...]],
    sets: Mapping[str, _Set],
    where: str,
    scheduler_name: str,
) -> None:
    """Refuse a profile that leaves out what splitsched always does (`kp.BUILT_IN`), or a
    point of a plugin that runs here only together with another (`kp.TIED`), naming the
    disabled entry that left it out."""
    for (name, point), why in kp.BUILT_IN.items():
        if name not in points[point]:
            field = _disabling(name, point, sets, where)
            kube = _kube_refusal(point, scheduler_name)
            raise SchedulerConfigError(
                f"{field}: {name} cannot be left out of {point}: {why}{kube}"
            )
    for (name, point), (other, why) in kp.TIED.items():
        if name in points[other] and name not in points[point]:
            field = _disabling(name, point, sets, where)
            raise SchedulerConfigError(
                f"{field}: {name} cannot be left out of {point} while it runs at {other}: {why}"
            )


def _disabling(name: str, point: str, sets: Mapping[str, _Set], where: str) -> str:
    """The disabled entry that removed `name` from `point` (the point's, else multiPoint's)."""
    for key in (point, kp.MULTI_POINT):
        hit = sets[key].disables(name)
        if hit is not None:
            return hit.path
    return f"{where}.plugins.{point}"


def _kube_refusal(point: str, scheduler_name: str) -> str:
    """kube-scheduler refuses a profile without a queue sort or bind plugin too."""
    if point == "queueSort":
        return (
            f" (kube-scheduler: only one queue sort plugin required for profile with "
            f'scheduler name "{scheduler_name}", but got 0)'
        )
    if point == "bind":
        return (
            f" (kube-scheduler: at least one bind plugin is needed for profile with scheduler "
            f'name "{scheduler_name}")'
        )
    return ""
