"""Profiles from a KubeSchedulerConfiguration: which plugins run at each extension point,
per schedulerName, built from an unmodified kubescheduler.config.k8s.io/v1 document.

`load_yaml` / `load` read the document strictly (`schedconfig.document`: unknown fields
and plugins refused in kube-scheduler's words, fields that do not apply noted), resolve
each profile's plugins by kube-scheduler's rules (`schedconfig.resolve`) and build the
plugins that run here (`splitsched.core.plugins.REGISTRY`) with their pluginConfig args,
one instance per plugin per profile. A profile without schedulerName is `splitsched`'s
(kube-scheduler would call it default-scheduler: splitsched runs beside it). Called by
the scheduler service and `splitsched simulate`; errors are `ProfileError`, naming the
field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from splitsched.core import framework
from splitsched.core.plugins import REGISTRY
from splitsched.core.plugins.volume_binding import VolumeBinding
from splitsched.core.schedconfig import document, resolve
from splitsched.core.schedconfig import kubeplugins as kp
from splitsched.core.schedconfig.schema import SchedulerConfigError

ProfileError = SchedulerConfigError
DEFAULT_SCHEDULER_NAME = "splitsched"
#: kube-scheduler v1.36's default plugins that are plugins here, in its order.
DEFAULT_PLUGINS: tuple[str, ...] = tuple(n for n, _ in kp.DEFAULT_MULTI_POINT if n in REGISTRY)
#: The points splitsched runs as plugin lists: the protocol and the Profile attribute.
_OURS: Mapping[str, tuple[type, str]] = {
    "preFilter": (framework.PreFilterPlugin, "pre_filter"),
    "filter": (framework.FilterPlugin, "filter"),
    "postFilter": (framework.PostFilterPlugin, "post_filter"),
    "preScore": (framework.PreScorePlugin, "pre_score"),
    "score": (framework.ScorePlugin, "score"),
    "reserve": (framework.ReservePlugin, "reserve"),
    "permit": (framework.PermitPlugin, "permit"),
}


@dataclass(frozen=True)
class SchedulerConfig:
    """A loaded configuration: the profiles by schedulerName, the queue's backoff, the
    VolumeBinding deadline, and the notes to report once."""

    profiles: dict[str, framework.Profile]
    pod_initial_backoff_seconds: int
    pod_max_backoff_seconds: int
    #: VolumeBindingArgs.bindTimeoutSeconds (one for all profiles; kube's default 600).
    volume_bind_timeout_seconds: int
    notes: tuple[str, ...]


def load_yaml(text: str) -> SchedulerConfig:
    """A configuration from YAML text ("" is the default: one `splitsched` profile)."""
    return _load(document.read_yaml(text))


def load(data: Mapping[str, Any] | None) -> SchedulerConfig:
    """A configuration from a parsed document (None: the default)."""
    return _load(document.read(data))


def load_profiles(data: Mapping[str, Any] | None) -> dict[str, framework.Profile]:
    return load(data).profiles


def load_profiles_yaml(text: str) -> dict[str, framework.Profile]:
    return load_yaml(text).profiles


def build_profile(spec: Mapping[str, Any]) -> framework.Profile:
    """The one profile of a document whose `profiles` is `[spec]` (tests, tools)."""
    return next(iter(load({"profiles": [spec]}).profiles.values()))


def _load(doc: document.Document) -> SchedulerConfig:
    out: dict[str, framework.Profile] = {}
    notes = list(doc.notes)
    timeouts: list[tuple[str, int]] = []
    for where, spec in doc.profiles:
        profile = _build(spec, where, notes)
        if profile.scheduler_name in out:
            raise ProfileError(f"{where}.schedulerName: duplicate {profile.scheduler_name!r}")
        out[profile.scheduler_name] = profile
        timeouts += [(where, t) for t in _bind_timeouts(profile)]
    _check_common_queue_sort(doc.profiles)
    for where, timeout in timeouts[1:]:
        if timeout != timeouts[0][1]:
            raise ProfileError(
                f"{where}: VolumeBinding bindTimeoutSeconds {timeout} differs from "
                f"{timeouts[0][0]}'s {timeouts[0][1]}: splitsched has one deadline for "
                "decisions with volume bindings"
            )
    return SchedulerConfig(
        profiles=out,
        pod_initial_backoff_seconds=doc.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=doc.pod_max_backoff_seconds,
        volume_bind_timeout_seconds=(
            timeouts[0][1] if timeouts else VolumeBinding.DEFAULT_BIND_TIMEOUT
        ),
        notes=tuple(dict.fromkeys(notes)),
    )


def _build(spec: Mapping[str, Any], where: str, notes: list[str]) -> framework.Profile:
    """One profile: resolve its plugins (kube's rules), build those that are plugins here
    and put each at the points it runs."""
    name = spec.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    if not name:
        raise ProfileError(f"{where}.schedulerName: Required value")
    resolved = resolve.resolve(spec.get("plugins"), where, name)
    notes.extend(resolved.notes)
    instances = _instances(spec, resolved, where)
    profile = framework.Profile(scheduler_name=name)
    for point, (proto, attr) in _OURS.items():
        for plugin_name in _run_at(point, resolved):
            obj = instances.get(plugin_name)
            if obj is None or not isinstance(obj, proto):
                continue  # built in, not run here, or a no-op here (VolumeBinding's Score)
            if point == "score":
                entry = framework.ScoreEntry(obj, resolved.weights[plugin_name])  # type: ignore[arg-type]
                profile.score.append(entry)
            else:
                getattr(profile, attr).append(obj)
    return profile


def _run_at(point: str, resolved: resolve.Resolved) -> tuple[str, ...]:
    """The plugins at a point; ours that pre-score where kube's do not (ImageLocality)
    pre-score wherever they score."""
    names = resolved.points[point]
    if point != "preScore":
        return names
    extra = [n for n in resolved.points["score"] if "preScore" not in kp.POINTS_OF[n]]
    return (*names, *extra)


def _instances(
    spec: Mapping[str, Any], resolved: resolve.Resolved, where: str
) -> dict[str, object]:
    """One instance per plugin of the registry that runs somewhere or has pluginConfig
    (so its args are judged even when it is disabled, as kube validates them)."""
    configured = {pc["name"]: j for j, pc in enumerate(spec.get("pluginConfig") or ())}
    if len(configured) < len(spec.get("pluginConfig") or ()):
        names = [pc["name"] for pc in spec["pluginConfig"]]
        dup = next(i for i, n in enumerate(names) if names.index(n) != i)
        raise ProfileError(f"{where}.pluginConfig[{dup}]: Duplicate value: {names[dup]!r}")
    wanted = [n for point in _OURS for n in resolved.points[point]] + list(configured)
    out: dict[str, object] = {}
    for name in dict.fromkeys(wanted):
        factory = REGISTRY.get(name)
        if factory is None:
            continue
        j = configured.get(name)
        args = _args(spec["pluginConfig"][j]) if j is not None else {}
        try:
            out[name] = factory(args)
        except (TypeError, ValueError, KeyError) as exc:
            raise ProfileError(f"{where}.pluginConfig[{j}].args.{exc}") from exc
    return out


def _args(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """A pluginConfig entry's args less their type fields (checked by the document)."""
    args = entry.get("args") or {}
    return {k: v for k, v in args.items() if k not in ("apiVersion", "kind")}


def _bind_timeouts(profile: framework.Profile) -> list[int]:
    """The profile's VolumeBinding bindTimeoutSeconds, if VolumeBinding runs in it."""
    plugins = [*profile.pre_filter, *profile.filter, *profile.reserve]
    found = {p.bind_timeout_seconds for p in plugins if isinstance(p, VolumeBinding)}
    return sorted(found)


def _check_common_queue_sort(specs: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """kube-scheduler has one queue: every profile must configure queueSort alike."""

    def queue_sort(spec: Mapping[str, Any]) -> object:
        """The queueSort set as kube compares it (an empty list is no list)."""
        raw = ((spec.get("plugins") or {}).get("queueSort")) or {}
        enabled = [(p["name"], p.get("weight") or 0) for p in raw.get("enabled") or ()]
        return enabled, [p["name"] for p in raw.get("disabled") or ()]

    first = queue_sort(specs[0][1])
    for where, spec in specs[1:]:
        if queue_sort(spec) != first:
            raise ProfileError(
                f"{where}.plugins.queueSort: Invalid value: must be the same for all profiles"
            )
