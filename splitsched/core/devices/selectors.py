"""CEL device selectors, compiled once and judged once per device.

DRA's selectors are CEL expressions over one variable, `device`: its `driver`, and its
`attributes` and `capacity` as maps of domain -> name -> value ("gpu.example.com" ->
"model" -> "A100"). kube compiles them with cel-go in the API server's environment; here
the Rust CEL of the `common-expression-language` package evaluates them (about 7 µs each),
with the parts of Kubernetes' CEL library DRA selectors use added as functions:
`quantity()` with compareTo/isGreaterThan/isLessThan/asInteger/asApproximateFloat/
isInteger/sign/add/sub, and `semver()`/`isSemver()` with compareTo/isGreaterThan/
isLessThan/major/minor/patch. As in kube, a domain the device does not have reads as an
empty map, and a name missing from a map is a runtime error.

Known differences from cel-go, each an error here where kube accepts the expression:
no static type check (a type error shows up when the selector runs), and no `cel.bind`,
optional syntax (`.?`) or string extensions (`lowerAscii`, `split`, ...).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import cel

from splitsched.core import quantity as quantities
from splitsched.core.devices import model, semver

_QUANTITY = "__quantity__"
_SEMVER = "__semver__"
#: Literal domains an expression indexes: they read as empty maps on a device without them.
_DOMAIN_INDEX = re.compile(r"""\b(attributes|capacity)\s*\[\s*(?:"([^"]*)"|'([^']*)')\s*\]""")


class SelectorError(Exception):
    """A selector that cannot be compiled, or that failed while judging a device."""


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled selector. `error` is set (and `program` None) when it does not compile."""

    source: str
    program: cel.Program | None
    error: str
    domains: frozenset[str]


@functools.lru_cache(maxsize=4096)
def compile_selector(source: str) -> Selector:
    """Compile `source` once; the same text anywhere in the cluster shares one program."""
    domains = frozenset(a or b for _kind, a, b in _DOMAIN_INDEX.findall(source))
    try:
        return Selector(source, cel.compile(source), "", domains)
    except (ValueError, RuntimeError) as exc:
        return Selector(source, None, f"compilation failed: {_one_line(exc)}", domains)


class CelDevice:
    """One device as its selectors see it, with the verdict of each selector kept: a
    device does not change until its slice does, and then a new CelDevice is made."""

    __slots__ = ("_context", "_variables", "_verdicts")

    def __init__(self, driver: str, device: model.Device) -> None:
        self._variables: dict[str, Any] = {
            "driver": driver,
            "allowMultipleAllocations": False,
            "attributes": _by_domain(device.attributes, _attribute_value),
            "capacity": _by_domain(device.capacity, _quantity_value),
        }
        self._context: cel.Context | None = None
        self._verdicts: dict[str, bool | SelectorError] = {}

    def matches(self, selector: Selector) -> bool:
        """Whether the device passes `selector`; raises SelectorError when it cannot say."""
        verdict = self._verdicts.get(selector.source)
        if verdict is None:
            verdict = self._judge(selector)
            self._verdicts[selector.source] = verdict
        if isinstance(verdict, SelectorError):
            raise verdict
        return verdict

    def _judge(self, selector: Selector) -> bool | SelectorError:
        if selector.program is None:
            return SelectorError(selector.error)
        try:
            result = selector.program.execute(self._context_for(selector.domains))
        except Exception as exc:  # the library raises KeyError, TypeError, RuntimeError...
            return SelectorError(f"CEL runtime error: {_runtime_message(exc)}")
        if not isinstance(result, bool):
            return SelectorError(
                f"CEL result of type {type(result).__name__} could not be converted to bool"
            )
        return result

    def _context_for(self, domains: frozenset[str]) -> cel.Context:
        missing = [
            (kind, d) for kind in ("attributes", "capacity") for d in domains
            if d not in self._variables[kind]
        ]  # fmt: skip
        if missing:  # rare: a selector reading a domain this device lacks
            for kind, domain in missing:
                self._variables[kind][domain] = {}
            self._context = None
        if self._context is None:
            self._context = _new_context({"device": self._variables})
        return self._context


def _by_domain(values: Mapping[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    maps: dict[str, dict[str, Any]] = {}
    for qualified, value in values.items():
        domain, _, name = qualified.rpartition("/")
        maps.setdefault(domain, {})[name] = convert(value)
    return maps


def _attribute_value(value: model.AttributeValue) -> Any:
    if isinstance(value, model.Version):
        return {_SEMVER: value.text}
    return value


def _quantity_value(value: Fraction) -> dict[str, str]:
    return {_QUANTITY: f"{value.numerator}/{value.denominator}"}


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def _runtime_message(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else ''}"
    return _one_line(exc)


# -- Kubernetes' quantity and semver CEL functions ----------------------------------------


def _as_quantity(value: Any) -> Fraction:
    if isinstance(value, dict) and _QUANTITY in value:
        return Fraction(value[_QUANTITY])
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    raise TypeError(f"not a quantity: {value!r:.60}")


def _quantity(text: str) -> dict[str, str]:
    return _quantity_value(quantities.parse_quantity(text, field="quantity()"))


def _as_version(value: Any) -> model.Version:
    if isinstance(value, dict) and _SEMVER in value:
        return semver.parse(value[_SEMVER])
    raise TypeError(f"not a semver: {value!r:.60}")


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, dict) and _SEMVER in a:
        x, y = _as_version(a), _as_version(b)
        return (x > y) - (x < y)
    p, q = _as_quantity(a), _as_quantity(b)
    return (p > q) - (p < q)


def _as_integer(value: Fraction) -> int:
    if value.denominator != 1 or not -(2**63) <= value < 2**63:
        raise ValueError(f"cannot convert {value} to int64")
    return int(value)


def _is_semver(text: str) -> bool:
    try:
        semver.parse(text)
    except ValueError:
        return False
    return True


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "semver": lambda text: {_SEMVER: semver.parse(text).text},
    "isSemver": _is_semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "asInteger": lambda q: _as_integer(_as_quantity(q)),
    "asApproximateFloat": lambda q: float(_as_quantity(q)),
    "isInteger": lambda q: _as_quantity(q).denominator == 1,
    "sign": lambda q: (_as_quantity(q) > 0) - (_as_quantity(q) < 0),
    "add": lambda a, b: _quantity_value(_as_quantity(a) + _as_quantity(b)),
    "sub": lambda a, b: _quantity_value(_as_quantity(a) - _as_quantity(b)),
    "major": lambda v: _as_version(v).key[0],
    "minor": lambda v: _as_version(v).key[1],
    "patch": lambda v: _as_version(v).key[2],
}


def _new_context(variables: Mapping[str, Any]) -> cel.Context:
    context = cel.Context()
    for name, function in _FUNCTIONS.items():
        context.add_function(name, function)
    for name, value in variables.items():
        context.add_variable(name, value)
    return context
