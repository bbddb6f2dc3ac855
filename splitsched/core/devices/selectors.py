"""CEL device selectors, compiled once and judged once per device.

DRA's selectors are CEL expressions over one variable, `device`: its `driver`, and its
`attributes` and `capacity` as maps of domain -> name -> value ("gpu.example.com" ->
"model" -> "A100"). kube compiles them with cel-go in the API server's environment; here
the Rust CEL of the `common-expression-language` package evaluates them (about 2 µs each),
with the parts of Kubernetes' CEL environment DRA selectors use added as Python functions:
`quantity()` with compareTo/isGreaterThan/isLessThan/asInteger/asApproximateFloat/
isInteger/sign/add/sub; `semver()`/`isSemver()`, with or without kube's `normalize`
argument, with compareTo/isGreaterThan/isLessThan/major/minor/patch; and cel-go's string
extension (cel_strings: lowerAscii, upperAscii, split, join, replace, substring, trim,
indexOf, lastIndexOf, charAt, format, strings.quote). As in kube, a domain the device does
not have reads as an empty map, whether written as a literal or computed (cel_domains),
and a name missing from a map is a runtime error.

Known differences from kube's cel-go:
- no static type check: kube refuses an ill-typed selector when it is compiled (for every
  device alike); here it fails when it runs, on the devices where it goes wrong, and a few
  kube refuses run (`[1, 2.0]`, which kube's homogeneous-literal check rejects);
- errors here where kube accepts the selector: `cel.bind`, optional syntax (`.?`, `[?`),
  two-variable comprehensions; of kube's other libraries only what is listed above (no
  list `isSorted`/`sum`/`min`/`max`, sets, regex `find`/`findAll`, URL, IP, CIDR,
  `format.*` or image functions); `format`'s `%e` and `%f` of NaN or infinities
  (cel_format);
- no runtime cost limit (kube stops a selector past its CEL cost budget);
- a domain written as a field (`device.attributes.gpu`, only possible without a dot) is
  not defaulted (cel_domains): missing, it is an error here, and `has()` of it is false
  where kube says true.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import cel

from splitsched.core import quantity as quantities
from splitsched.core.devices import cel_domains, cel_strings, model, semver
from splitsched.core.devices.cel_format import QUANTITY as _QUANTITY
from splitsched.core.devices.cel_format import SEMVER as _SEMVER

#: Verdicts kept per device. A device meets few selectors at a time (its class's and its
#: requests'), but claims with their own selectors would otherwise grow every device's
#: memo for as long as its slice lives. When a new verdict finds the memo full, the least
#: recently used one goes; uses count only once the memo is full (keeping their order
#: costs a dict pop and insert), so before that a verdict dates from when it was made.
VERDICTS_PER_DEVICE = 16


class SelectorError(Exception):
    """A selector that cannot be compiled, or that failed while judging a device."""


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled selector. `error` is set (and `program` None) when it does not compile;
    `functions` names the Python functions it calls, registered where it runs."""

    source: str
    program: cel.Program | None
    error: str
    functions: frozenset[str] = frozenset()


@functools.lru_cache(maxsize=4096)
def compile_selector(source: str) -> Selector:
    """Compile `source` once; the same text anywhere in the cluster shares one program.
    The text as written is compiled first, so a syntax error quotes the user's text."""
    try:
        program = cel.compile(source)
    except (ValueError, RuntimeError) as exc:
        return Selector(source, None, f"compilation failed: {_one_line(exc)}")
    rewritten = cel_domains.with_empty_domains(source)
    if rewritten != source:
        # Should the rewrite not compile, the text as written runs: a missing domain then
        # raises "no such key" instead of reading as an empty map.
        with contextlib.suppress(ValueError, RuntimeError):
            program = cel.compile(rewritten)
    return Selector(source, program, "", _functions_called(program))


def _functions_called(program: cel.Program) -> frozenset[str]:
    """Our functions `program` calls; `strings.quote(x)` reads as `quote` on `strings`."""
    references = program.references()
    names = set(references["functions"])
    names |= {f"{v}.{f}" for v in references["variables"] for f in references["functions"]}
    return frozenset(names & _FUNCTIONS.keys())


class CelDevice:
    """One device as its selectors see it, with the verdicts of the selectors it met last
    kept: a device does not change until its slice does, and then a new CelDevice is made.
    Its CEL context is made when a selector first runs and holds the device as it is, so a
    verdict never depends on which selectors ran before; only the functions a selector
    calls are added to it, when that selector first runs here."""

    __slots__ = ("_context", "_device", "_driver", "_functions", "_verdicts")

    def __init__(self, driver: str, device: model.Device) -> None:
        self._driver = driver
        self._device = device
        self._context: cel.Context | None = None
        self._functions: frozenset[str] = frozenset()
        self._verdicts: dict[str, bool | SelectorError] = {}

    def matches(self, selector: Selector) -> bool:
        """Whether the device passes `selector`; raises SelectorError when it cannot say."""
        verdicts = self._verdicts
        verdict = verdicts.get(selector.source)
        if verdict is None:
            verdict = self._judge(selector)
            if len(verdicts) >= VERDICTS_PER_DEVICE:
                del verdicts[next(iter(verdicts))]  # the least recently used
            verdicts[selector.source] = verdict
        elif len(verdicts) >= VERDICTS_PER_DEVICE:  # full: keep the order of use
            verdicts[selector.source] = verdicts.pop(selector.source)
        if isinstance(verdict, SelectorError):
            raise verdict
        return verdict

    def _judge(self, selector: Selector) -> bool | SelectorError:
        if selector.program is None:
            return SelectorError(selector.error)
        try:
            result = selector.program.execute(self._context_for(selector))
        except Exception as exc:  # the library raises KeyError, TypeError, RuntimeError...
            return SelectorError(f"CEL runtime error: {_runtime_message(exc)}")
        if not isinstance(result, bool):
            return SelectorError(
                f"CEL result of type {type(result).__name__} could not be converted to bool"
            )
        return result

    def _context_for(self, selector: Selector) -> cel.Context:
        if self._context is None:
            device = {
                "driver": self._driver,
                "allowMultipleAllocations": False,
                "attributes": _by_domain(self._device.attributes, _attribute_value),
                "capacity": _by_domain(self._device.capacity, _quantity_value),
            }
            self._context = cel.Context({"device": device})
        missing = selector.functions - self._functions
        if missing:  # functions only: what a selector reads of the device never changes
            for name in missing:
                self._context.add_function(name, _FUNCTIONS[name])
            self._functions |= missing
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


def _semver(*args: Any) -> dict[str, str]:
    return {_SEMVER: _parse_semver("semver", args).text}


def _is_semver(*args: Any) -> bool:
    try:
        _parse_semver("isSemver", args)
    except ValueError:
        return False
    return True


def _parse_semver(name: str, args: tuple[Any, ...]) -> model.Version:
    """`semver(text)` or kube's `semver(text, normalize)` (SemverLib version 1, in kube's
    base environment since 1.33)."""
    if not (
        len(args) in (1, 2)
        and isinstance(args[0], str)
        and all(isinstance(a, bool) for a in args[1:])
    ):
        raise TypeError(f"no such overload: {name}() takes a string and an optional bool")
    normalize = len(args) == 2 and args[1]
    return semver.parse(_normalized(args[0]) if normalize else args[0])


def _normalized(text: str) -> str:
    """kube's normalizeAndParse: drop one leading "v", leading zeros of each number
    ("01.02.03" -> "1.2.3") and fill a missing minor or patch with 0 ("1.2" -> "1.2.0")."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            parts[i] = part if part and part[0] in "0123456789" else "0" + part
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "semver": _semver,
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
    **cel_strings.FUNCTIONS,
}
