"""Strict, typed reading of a configuration document, as kube-scheduler decodes one.

A schema is a tree of `Scalar`, `ListOf`, `MapOf` and `Struct` values; `check` walks a
parsed YAML value against it and answers what kube-scheduler's strict decoder would: a
field no struct knows is an error (all of them in one message, sorted, in kube's words:
`strict decoding error: unknown field "profiles[0].pluginConfig[0].args.foo"`), a value
of the wrong type is an error naming its path, and a null is as good as absent (Go
decodes null into the zero value). A field may carry a note (`Struct.notes`): when the
document sets it, `check` reports it once, e.g. a field splitsched accepts but ignores.

Pure: called by `schedconfig.document` and `schedconfig.pluginargs`; knows no field of
its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: metav1.Duration's text: Go's time.ParseDuration ("15s", "1m30s", "300ms", "0").
_DURATION = re.compile(r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+$|^[-+]?0$")


class SchedulerConfigError(ValueError):
    """A scheduler configuration that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class Scalar:
    """A leaf: "string", "integer", "boolean", "number" or "duration" (Go's text)."""

    kind: str

    def accepts(self, value: object) -> bool:
        if self.kind == "string":
            return isinstance(value, str)
        if self.kind == "boolean":
            return isinstance(value, bool)
        if self.kind == "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        if self.kind == "number":
            return isinstance(value, int | float) and not isinstance(value, bool)
        return isinstance(value, str) and bool(_DURATION.match(value))

    def describe(self) -> str:
        if self.kind == "duration":
            return "a duration such as 15s or 1m30s"
        return f"{'an' if self.kind == 'integer' else 'a'} {self.kind}"


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Spec


@dataclass(frozen=True, slots=True)
class MapOf:
    """A mapping from strings to `value` (label maps)."""

    value: Spec


@dataclass(frozen=True, slots=True)
class Struct:
    """A Go struct: its JSON field names; `notes` are reported when a field is set."""

    name: str
    fields: Mapping[str, Spec]
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Raw:
    """Anything (a RawExtension): checked elsewhere, by whoever knows its type."""


Spec = Scalar | ListOf | MapOf | Struct | Raw

STRING = Scalar("string")
INTEGER = Scalar("integer")
BOOLEAN = Scalar("boolean")
NUMBER = Scalar("number")
DURATION = Scalar("duration")
STRINGS = ListOf(STRING)


@dataclass(slots=True)
class Findings:
    """What one walk found besides type errors: unknown fields and notes, by path."""

    unknown: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def raise_unknown(self) -> None:
        """kube-scheduler's strict decoding error, every unknown field sorted."""
        if self.unknown:
            fields = ", ".join(f'unknown field "{p}"' for p in sorted(self.unknown))
            raise SchedulerConfigError(f"strict decoding error: {fields}")


def join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def check(value: Any, spec: Spec, path: str, found: Findings) -> None:
    """Walk `value` against `spec`: unknown fields and notes go to `found`; a value of
    the wrong type raises SchedulerConfigError naming `path`."""
    if value is None or isinstance(spec, Raw):
        return
    if isinstance(spec, Scalar):
        if not spec.accepts(value):
            raise SchedulerConfigError(f"{path}: expected {spec.describe()}, got {value!r}")
    elif isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise SchedulerConfigError(f"{path}: expected a list, got {value!r}")
        for i, item in enumerate(value):
            check(item, spec.item, f"{path}[{i}]", found)
    elif isinstance(spec, MapOf):
        for key, item in _mapping(value, path).items():
            check(item, spec.value, join(path, str(key)), found)
    else:
        _check_struct(value, spec, path, found)


def _check_struct(value: Any, spec: Struct, path: str, found: Findings) -> None:
    for key, item in _mapping(value, path).items():
        sub = join(path, str(key))
        known = spec.fields.get(key) if isinstance(key, str) else None
        if known is None:
            found.unknown.append(sub)
            continue
        check(item, known, sub, found)
        note = spec.notes.get(key)
        if note is not None and item is not None:
            found.notes.append(f"{sub}: {note}")


def _mapping(value: Any, path: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise SchedulerConfigError(f"{path or 'the document'}: expected a mapping, got {value!r}")
    return value
