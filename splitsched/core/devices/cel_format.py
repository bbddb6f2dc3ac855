"""cel-go's `<string>.format(<list>)` as kube's CEL environment has it (the strings
extension at version 2, so cel-go's first formatter, not the one of version 4).

Clauses: `%s`, `%d`, `%f` and `%.Nf`, `%b`, `%x`, `%X`, `%o` and `%%`, with cel-go's
words for a wrong argument. kube prints `%f` through x/text's en-US printer, so thousands
are grouped ("1,234.500000"). `%s` prints a double as Go's %g does, and a list or map the
way cel-go does (strings quoted, doubles as %.6f, map entries sorted). Errors here where
kube prints something: `%e` (x/text writes a times sign and superscript digits), `%f` of
NaN or an infinity, and timestamps or durations. kube also rejects, when the selector is
compiled, a constant format string whose literal list does not fit; here that shows when
the selector runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

#: The key of the one-entry maps that carry Kubernetes' Quantity and Semver values in CEL.
QUANTITY = "__quantity__"
SEMVER = "__semver__"
_OPAQUE = {QUANTITY: "kubernetes.Quantity", SEMVER: "kubernetes.Semver"}
_MAX_PRECISION = 1000
_GO_ESCAPES = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
    "\v": "\\v", "\\": "\\\\", '"': '\\"',
}  # fmt: skip
_NON_FINITE = {"NaN", "Infinity", "-Infinity"}
_PRECISION = "error while parsing precision: "
_ATOI = "error while converting precision to integer: "


class _ClauseError(ValueError):
    """A clause that cannot format its argument (cel-go: "error during formatting")."""


def type_name(value: Any) -> str:
    """`value`'s CEL type, as cel-go names it in its errors."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _OPAQUE:
        return _OPAQUE[next(iter(value))]
    names = (
        (bool, "bool"), (int, "int"), (float, "double"), (str, "string"), (bytes, "bytes"),
        (list, "list"), (dict, "map"), (type(None), "null_type"),
        (datetime, "google.protobuf.Timestamp"), (timedelta, "google.protobuf.Duration"),
    )  # fmt: skip
    return next((name for kind, name in names if isinstance(value, kind)), type(value).__name__)


def format_string(*args: Any) -> str:
    """`args[0]` with each clause replaced by the next element of the list `args[1]`."""
    if len(args) != 2 or not isinstance(args[0], str) or not isinstance(args[1], list):
        raise TypeError(f"no such overload: format({', '.join(map(type_name, args))})")
    text, values = args
    parts: list[str] = []
    pos = used = 0
    while pos < len(text):
        percent = text.find("%", pos)
        if percent != pos:
            parts.append(text[pos : len(text) if percent < 0 else percent])
            pos = len(text) if percent < 0 else percent
        elif text.startswith("%%", pos):
            parts.append("%")
            pos += 2
        else:
            if used >= len(values):
                raise IndexError(f"index {used} out of range")
            pos, verb, precision = _clause(text, pos + 1)
            try:
                parts.append(_CLAUSES[verb](values[used], precision))
            except _ClauseError as exc:
                raise ValueError(f"error during formatting: {exc}") from None
            used += 1
    return "".join(parts)


def _clause(text: str, start: int) -> tuple[int, str, int | None]:
    """(where the clause starting at `start` ends, its verb, its precision or None)."""
    if start >= len(text):
        raise ValueError("unexpected end of string")
    precision = None
    pos = start
    if text[pos] == ".":
        pos += 1
        while pos < len(text) and text[pos] in "0123456789":
            pos += 1
        digits = text[start + 1 : pos]
        if pos >= len(text):
            raise _parse_error(f"{_PRECISION}could not find end of precision specifier")
        if not digits:
            raise _parse_error(f'{_PRECISION}{_ATOI}strconv.Atoi: parsing "": invalid syntax')
        precision = int(digits)
        if precision > _MAX_PRECISION:
            raise _parse_error(f"precision {precision} is larger than {_MAX_PRECISION}")
    verb = text[pos]
    if verb not in _CLAUSES:
        raise _parse_error(f'unrecognized formatting clause "{verb}"')
    return pos + 1, verb, precision


def _parse_error(detail: str) -> ValueError:
    return ValueError(f"could not parse formatting clause: {detail}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(value: Any, _precision: int | None = None) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_member(v) for v in value) + "]"
    if isinstance(value, dict) and type_name(value) == "map":
        return _map(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_g(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise _ClauseError("invalid UTF-8 in bytes, cannot convert to string") from None
    if value is None:
        return "null"
    raise _ClauseError(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, "
        f"lists, types, durations, and timestamps, was given {type_name(value)}"
        + (" (not supported here)" if isinstance(value, datetime | timedelta) else "")
    )


def _member(value: Any) -> str:
    """A list element or map value inside %s: strings quoted, doubles as %.6f."""
    if isinstance(value, float):
        if math.isfinite(value):
            return f"{value:.6f}"
        return _go_quote("NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf")
    if isinstance(value, dict) and type_name(value) != "map":
        raise _ClauseError(f"no formatting function for {type_name(value)}")
    text = _string(value)
    if isinstance(value, str):
        return _go_quote(text)
    return "b" + _go_quote(text) if isinstance(value, bytes) else text


def _map(value: dict[Any, Any]) -> str:
    entries = []
    for key, item in value.items():
        if not isinstance(key, str | bool | int):
            raise _ClauseError(f"no formatting function for map key of type {type_name(key)}")
        entries.append((_go_quote(key) if isinstance(key, str) else _string(key), _member(item)))
    return "{" + ", ".join(f"{k}:{v}" for k, v in sorted(entries, key=lambda e: e[0])) + "}"


def _decimal(value: Any, _precision: int | None) -> str:
    if not _is_int(value):
        raise _ClauseError(
            f"decimal clause can only be used on integers, was given {type_name(value)}"
        )
    return str(value)


def _fixed(value: Any, precision: int | None) -> str:
    if not isinstance(value, float) and not (isinstance(value, str) and value in _NON_FINITE):
        raise _ClauseError(
            f"fixed-point clause can only be used on doubles, was given {type_name(value)}"
        )
    if not isinstance(value, float) or not math.isfinite(value):
        raise _ClauseError(f"fixed-point formatting of {value} is not supported here")
    return f"{value:,.{6 if precision is None else precision}f}"


def _scientific(value: Any, _precision: int | None) -> str:
    raise _ClauseError("the scientific clause (%e) is not supported here")


def _binary(value: Any, _precision: int | None) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if not isinstance(value, int):
        raise _ClauseError(
            f"only integers and bools can be formatted as binary, was given {type_name(value)}"
        )
    return format(value, "b")


def _hex(upper: bool) -> Callable[[Any, int | None], str]:
    def clause(value: Any, _precision: int | None) -> str:
        if isinstance(value, str | bytes):
            data = value.encode("utf-8") if isinstance(value, str) else value
            text = data.hex()
        elif _is_int(value):
            text = format(value, "x")
        else:
            raise _ClauseError(
                "only integers, byte buffers, and strings can be formatted as hex, "
                f"was given {type_name(value)}"
            )
        return text.upper() if upper else text

    return clause


def _octal(value: Any, _precision: int | None) -> str:
    if not _is_int(value):
        raise _ClauseError(
            f"octal clause can only be used on integers, was given {type_name(value)}"
        )
    return format(value, "o")


_CLAUSES: dict[str, Callable[[Any, int | None], str]] = {
    "s": _string,
    "d": _decimal,
    "f": _fixed,
    "e": _scientific,
    "b": _binary,
    "x": _hex(upper=False),
    "X": _hex(upper=True),
    "o": _octal,
}


def go_g(value: float) -> str:
    """`value` as Go's strconv.FormatFloat(value, 'g', -1, 64) spells it: the shortest
    digits that read back, in exponent form below 1e-4 and from 1e+06 up ("1e+06")."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    shortest = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    point = len(digits) + int(shortest.exponent)  # digits before the decimal point
    exponent = point - 1
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _go_quote(text: str) -> str:
    """`text` as Go's %q (strconv.Quote) writes it."""
    out = []
    for char in text:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'
