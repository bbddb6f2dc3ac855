"""A KubeSchedulerConfiguration document, read as kube-scheduler v1.36 reads it.

`read_yaml` parses the text (a key given twice is refused, as kube's YAML decoder
refuses it) and `read` checks the document: `apiVersion: kubescheduler.config.k8s.io/v1`
and `kind: KubeSchedulerConfiguration` (older versions are refused with the version that
removed them; a document with neither, the short form our chart and tests used before,
is read as v1), then every field strictly (`schedconfig.v1`, `schedconfig.pluginargs`),
then the top-level values kube validates. What it returns still holds each profile as
its mapping: `splitsched.core.profiles` builds them, and the scheduler and `splitsched
simulate` report `notes` once.

Pure: no I/O; the callers read the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from splitsched.core.schedconfig import pluginargs, v1
from splitsched.core.schedconfig.schema import Findings, SchedulerConfigError, check

#: Versions kube-scheduler no longer reads, and the release that removed each.
_REMOVED = {"v1beta3": "v1.29", "v1beta2": "v1.28", "v1beta1": "v1.26", "v1alpha2": "v1.23"}
_DEFAULT_INITIAL_BACKOFF = 1
_DEFAULT_MAX_BACKOFF = 10


@dataclass(frozen=True, slots=True)
class Document:
    """A checked configuration: its profiles' mappings (with their paths), the queue's
    backoff in seconds, and the notes to report once (fields accepted but not applied)."""

    profiles: tuple[tuple[str, Mapping[str, Any]], ...]
    pod_initial_backoff_seconds: int
    pod_max_backoff_seconds: int
    notes: tuple[str, ...]


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping key given twice (sigs.k8s.io/yaml does)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise SchedulerConfigError(f'line {line}: key "{key}" already set in map')
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(text: str) -> Document:
    """`read` of a YAML text; an empty text is the default configuration."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise SchedulerConfigError(f"scheduler config is not valid YAML: {exc}") from exc
    return read(data)


def read(data: Any) -> Document:
    """Check a parsed document (None: the default configuration); see the module."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SchedulerConfigError("scheduler config: expected a mapping at the top level")
    _check_type_meta(data)
    found = Findings()
    check(data, v1.CONFIGURATION, "", found)
    specs = data.get("profiles") or [{}]
    for i, spec in enumerate(specs):
        for j, entry in enumerate((spec or {}).get("pluginConfig") or ()):
            if not isinstance(entry, Mapping) or not entry.get("name"):
                raise SchedulerConfigError(f"profiles[{i}].pluginConfig[{j}].name: Required value")
            pluginargs.check_args(
                entry["name"], entry.get("args"), f"profiles[{i}].pluginConfig[{j}]", found
            )
    found.raise_unknown()
    initial, most = _backoff(data)
    _check_ranges(data)
    return Document(
        profiles=tuple((f"profiles[{i}]", spec or {}) for i, spec in enumerate(specs)),
        pod_initial_backoff_seconds=initial,
        pod_max_backoff_seconds=most,
        notes=tuple(found.notes),
    )


def _check_type_meta(data: Mapping[str, Any]) -> None:
    version, kind = data.get("apiVersion"), data.get("kind")
    if version is None and kind is None:
        return  # the short form: profiles only, read as v1
    if version != v1.API_VERSION:
        group, _, ver = str(version).partition("/")
        removed = _REMOVED.get(ver) if group == "kubescheduler.config.k8s.io" else None
        why = f" ({ver} was removed in kube-scheduler {removed})" if removed else ""
        raise SchedulerConfigError(
            f"apiVersion: {version!r} is not supported: use {v1.API_VERSION}{why}"
        )
    if kind != v1.KIND:
        raise SchedulerConfigError(f"kind: expected {v1.KIND}, got {kind!r}")


def _backoff(data: Mapping[str, Any]) -> tuple[int, int]:
    """podInitialBackoffSeconds / podMaxBackoffSeconds, as kube defaults and checks them."""
    initial = data.get("podInitialBackoffSeconds")
    most = data.get("podMaxBackoffSeconds")
    initial = _DEFAULT_INITIAL_BACKOFF if initial is None else initial
    most = _DEFAULT_MAX_BACKOFF if most is None else most
    if initial <= 0:
        raise SchedulerConfigError(
            f"podInitialBackoffSeconds: Invalid value: {initial}: must be greater than 0"
        )
    if most < initial:
        raise SchedulerConfigError(
            f"podMaxBackoffSeconds: Invalid value: {most}: must be greater than or equal to "
            "PodInitialBackoffSeconds"
        )
    return initial, most


def _check_ranges(data: Mapping[str, Any]) -> None:
    """The other top-level and profile values kube-scheduler validates."""
    parallelism = data.get("parallelism")
    if parallelism is not None and parallelism <= 0:
        raise SchedulerConfigError(
            f"parallelism: Invalid value: {parallelism}: should be an integer value greater "
            "than zero"
        )
    _check_percentage("percentageOfNodesToScore", data.get("percentageOfNodesToScore"))
    for i, spec in enumerate(data.get("profiles") or ()):
        where = f"profiles[{i}].percentageOfNodesToScore"
        _check_percentage(where, (spec or {}).get("percentageOfNodesToScore"))


def _check_percentage(path: str, value: int | None) -> None:
    if value is not None and not 0 <= value <= 100:
        raise SchedulerConfigError(f"{path}: Invalid value: {value}: not in valid range [0-100]")
