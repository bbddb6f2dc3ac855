"""Typed field readers for API JSON, and the errors that name the field that is wrong.

Every converter in this package reads its input through these: each reader takes the raw
value and the field's path relative to the object being read, returns the value in the
type the models want (absent and null become the Kubernetes default), and raises
`BadField` naming the path otherwise. Nested readers use paths relative to their own
object; `within` re-roots an error under the parent's path only when it propagates, so
the happy path builds no path strings. The public converters turn the last `BadField`
into a `ConversionError` carrying the object's name.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from splitsched.core.quantity import QuantityError, canonical_amount

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ConversionError(ValueError):
    """An API object that cannot be converted. `object_ref` is e.g. "pod default/web",
    `detail` the field path and problem ("spec.priority: expected an integer, got 'x'")."""

    def __init__(self, object_ref: str, detail: str) -> None:
        self.object_ref = object_ref
        self.detail = detail
        super().__init__(f"{object_ref}: {detail}" if object_ref else detail)


class BadField(Exception):
    """Raised inside the converters; turned into ConversionError with the object's name."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(path, problem)
        self.path = path
        self.problem = problem

    @property
    def detail(self) -> str:
        return f"{self.path}: {self.problem}" if self.path else self.problem


def within(error: BadField, prefix: str) -> BadField:
    """`error` re-rooted under `prefix` ("spec.tolerations[1]" + "operator")."""
    path = error.path
    if not path:
        joined = prefix
    elif path[0] == "[":
        joined = prefix + path
    else:
        joined = f"{prefix}.{path}"
    return BadField(joined, error.problem)


def at(value: object, path: str, convert: Callable[[object], Any]) -> Any:
    """`convert(value)` with any error re-rooted under `path`."""
    try:
        return convert(value)
    except BadField as e:
        raise within(e, path) from None


def each(value: object, path: str, convert: Callable[[object], Any]) -> tuple[Any, ...]:
    """`convert` applied to every item of the list at `path`; errors name the item."""
    out = []
    for i, item in enumerate(as_list(value, path)):
        try:
            out.append(convert(item))
        except BadField as e:
            raise within(e, f"{path}[{i}]") from None
    return tuple(out)


def show(value: object) -> str:
    """A value as an error message quotes it: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def type_name(value: object) -> str:
    """What a wrong value is, in the words of an error message ("a list", "string 'x'")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"number {show(value)}"
    if isinstance(value, str):
        return f"string {show(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# ---- scalars and containers -------------------------------------------------------------


def as_object(value: object, path: str) -> dict[str, Any]:
    """An optional object: absent/null -> {}."""
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    raise BadField(path, f"expected an object, got {type_name(value)}")


def as_list(value: object, path: str) -> list[Any]:
    if isinstance(value, list):
        return value
    if value is None:
        return []
    raise BadField(path, f"expected a list, got {type_name(value)}")


def as_str(value: object, path: str, default: str = "") -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return default
    raise BadField(path, f"expected a string, got {type_name(value)}")


def required(obj: dict[str, Any], key: str) -> object:
    """A field that must be present and not null; its value unchecked."""
    value = obj.get(key)
    if value is None:
        raise BadField(key, "required")
    return value


def required_str(obj: dict[str, Any], key: str) -> str:
    """A string field that must be present and non-empty."""
    value = as_str(obj.get(key), key)
    if not value:
        raise BadField(key, "required")
    return value


def as_int(value: object, path: str, *, low: int, high: int) -> int:
    if type(value) is not int:  # bools and floats are not integers here
        raise BadField(path, f"expected an integer, got {type_name(value)}")
    if not low <= value <= high:
        raise BadField(path, f"{value} is out of range [{low}, {high}]")
    return value


def as_bool(value: object, path: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise BadField(path, f"expected a boolean, got {type_name(value)}")


def as_enum(value: object, path: str, allowed: frozenset[str], default: str) -> str:
    if value is None:
        return default
    if isinstance(value, str) and value in allowed:
        return value
    raise BadField(path, f"unsupported value {show(value)}: expected one of {sorted(allowed)}")


def as_str_map(value: object, path: str) -> dict[str, str]:
    """A map of strings, returned as is (no copy)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadField(path, f"expected a map of strings, got {type_name(value)}")
    for key, item in value.items():
        if not isinstance(item, str) or not isinstance(key, str):
            raise BadField(f"{path}[{key}]", f"expected a string, got {type_name(item)}")
    return value


def as_str_tuple(value: object, path: str) -> tuple[str, ...]:
    items = as_list(value, path)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise BadField(f"{path}[{i}]", f"expected a string, got {type_name(item)}")
    return tuple(items)


def as_timestamp(value: object, path: str) -> float:
    """An RFC3339 timestamp (or an unquoted YAML one) as seconds since the epoch; 0.0 when
    absent. Timestamps without a zone are UTC."""
    if value is None:
        return 0.0
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise BadField(path, f"invalid RFC3339 timestamp {show(value)}") from None
    elif isinstance(value, datetime):  # unquoted timestamps in hand-written YAML
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    else:
        raise BadField(path, f"expected an RFC3339 timestamp, got {type_name(value)}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


# ---- quantities -------------------------------------------------------------------------


def as_resources(value: object, path: str) -> dict[str, int]:
    """A ResourceList ({"cpu": "100m", ...}) in canonical integers."""
    if value is None or (isinstance(value, dict) and not value):
        return {}
    if not isinstance(value, dict):
        raise BadField(path, f"expected a map of quantities, got {type_name(value)}")
    out: dict[str, int] = {}
    for name, amount in value.items():
        if not isinstance(name, str) or not name:
            raise BadField(path, f"invalid resource name {show(name)}")
        try:
            out[name] = canonical_amount(name, amount, field="")
        except QuantityError as e:
            raise BadField(f"{path}.{name}", e.reason) from None
    return out


def requests_with_limits(value: object, path: str) -> dict[str, int]:
    """requests, with each resource that only has a limit defaulted to that limit
    (SetDefaults_Pod)."""
    res = as_object(value, path)
    if not res:
        return {}
    try:
        requests = as_resources(res.get("requests"), "requests")
        raw_limits = res.get("limits")
        if raw_limits:
            for name, amount in as_resources(raw_limits, "limits").items():
                if name not in requests:
                    requests[name] = amount
    except BadField as e:
        raise within(e, path) from None
    return requests


# ---- metadata ---------------------------------------------------------------------------


def named(obj: object) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The object, its metadata and its name, which pods and nodes must have."""
    if not isinstance(obj, dict):
        raise BadField("", f"expected an object, got {type_name(obj)}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise BadField("metadata", f"expected an object, got {type_name(meta)}")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise BadField(
            "metadata.name", "required" if name is None else "expected a non-empty string"
        )
    return obj, meta, name
