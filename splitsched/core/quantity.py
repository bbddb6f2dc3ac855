"""Kubernetes resource quantities ("100m", "1Gi", "2e3") parsed exactly, as integers the core uses.

Called by `splitsched.core.convert` for every request, limit, overhead and allocatable
amount, and by anything that reads quantities from configuration. Mirrors
`k8s.io/apimachinery/pkg/api/resource.ParseQuantity`:

    quantity ::= [+-]? number suffix
    number   ::= digits | digits "." digits | digits "." | "." digits
    suffix   ::= "" | n u m k M G T P E          (decimal SI)
               | Ki Mi Gi Ti Pi Ei               (binary SI)
               | (e|E) [+-]? digits              (decimal exponent, |exp| <= 2^31-1)

Non-zero values are rounded up (away from zero) to a multiple of 1n, as ParseQuantity
does, so "0.1n" is 1n. Two deliberate differences from Go, both stricter, neither
reachable for objects that come back from the API server (it re-serialises quantities in
canonical form): a number with no digit at all ("Ki", ".", "-") is rejected where Go
reads it as 0, and a binary-suffixed value beyond 2^63-1 is returned exactly instead of
being capped, so `canonical_amount` reports it out of range.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = [
    "QuantityError",
    "canonical_amount",
    "parse_quantity",
    "to_milli",
    "to_units",
]

INT64_MAX = 2**63 - 1
_EXPONENT_MAX = 2**31 - 1  # Go keeps the exponent in an int32 that it later negates
# Values at or beyond 10**_MAGNITUDE_LIMIT are refused before any big-number arithmetic,
# so "1e2147483647" costs nothing; they are far beyond int64 anyway.
_MAGNITUDE_LIMIT = 1000
_NANO = 10**9

_DECIMAL_SUFFIX = {
    "": 0,
    "n": -9,
    "u": -6,
    "m": -3,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

# [0-9], never \d: Python's \d also matches other scripts' digits, which Go rejects.
# "1E" is the decimal suffix exa; "1E3" backtracks into the exponent branch.
_GRAMMAR = re.compile(
    r"([+-]?)([0-9]*)(?:\.([0-9]*))?"
    r"(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?"
)

# Results of canonical_amount for strings already seen (the same few dozen quantity
# strings recur across every pod of a cluster). Bounded: cleared when full.
_CACHE_LIMIT = 16384
_MILLI_CACHE: dict[str, int] = {}
_UNITS_CACHE: dict[str, int] = {}


class QuantityError(ValueError):
    """A quantity that is malformed, negative where it must not be, or out of range.

    `reason` is the message without the field (e.g. "invalid quantity 'abc'") so callers
    that know a fuller path can build their own message.
    """

    def __init__(self, *, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class _Invalid(Exception):
    pass


class _OutOfRange(Exception):
    pass


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _digits_to_int(digits: str) -> int:
    """int() of an ASCII digit string of any length (int() refuses > 4300 digits)."""
    if len(digits) <= 4000:
        return int(digits)
    n = 0
    for start in range(0, len(digits), 4000):
        chunk = digits[start : start + 4000]
        n = n * 10 ** len(chunk) + int(chunk)
    return n


def _parse_text(text: str) -> Fraction:
    """The exact value of `text`, rounded up to 1n like ParseQuantity. Raises _Invalid or
    _OutOfRange."""
    m = _GRAMMAR.fullmatch(text)
    if m is None:
        raise _Invalid
    sign, whole, frac, suffix, exponent = m.groups()
    frac = frac or ""
    if not whole and not frac:
        raise _Invalid
    e2 = 0
    if exponent is not None:
        body = exponent.lstrip("+-").lstrip("0")
        if len(body) > 10:
            raise _Invalid
        e10 = int(exponent)
        if e10 > _EXPONENT_MAX or e10 < -_EXPONENT_MAX:
            raise _Invalid
    elif suffix is not None and suffix in _BINARY_SUFFIX:
        e10 = 0
        e2 = _BINARY_SUFFIX[suffix]
    else:
        e10 = _DECIMAL_SUFFIX[suffix or ""]
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    significant = digits.rstrip("0")
    e10 += len(digits) - len(significant) - len(frac)
    count = len(significant)
    # value = N * 10**e10 * 2**e2 with 10**(count-1) <= N < 10**count, and 2**e2 < 10**19.
    if count - 1 + e10 >= _MAGNITUDE_LIMIT:
        raise _OutOfRange
    negative = sign == "-"
    if count + e10 + 19 <= -9:  # below 1n: rounds up to exactly 1n
        return Fraction(-1 if negative else 1, _NANO)
    n = _digits_to_int(significant) << e2
    if e10 >= 0:
        result = Fraction(n * 10**e10)
    elif e10 >= -9:
        result = Fraction(n, 10**-e10)
    else:
        scaled = -(-n // 10 ** (-e10 - 9))  # ceil to a whole number of nanos
        result = Fraction(scaled, _NANO)
    return -result if negative else result


def _parse_any(value: object) -> Fraction:
    """JSON ints are exact, floats are read through their shortest repr ("0.1" not
    0.1000000000000000055...), strings through the grammar."""
    if isinstance(value, str):
        return _parse_text(value)
    if isinstance(value, bool):
        raise _Invalid
    if isinstance(value, int):
        if abs(value).bit_length() > 3400:  # ~10**1000
            raise _OutOfRange
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Invalid
        return _parse_text(repr(value))
    raise _Invalid


def parse_quantity(value: str | int | float, *, field: str) -> Fraction:
    """The exact value of a quantity; QuantityError naming `field` if it is malformed."""
    try:
        return _parse_any(value)
    except _Invalid:
        raise QuantityError(
            field=field, value=value, reason=f"invalid quantity {_show(value)}"
        ) from None
    except _OutOfRange:
        raise QuantityError(
            field=field, value=value, reason=f"quantity {_show(value)} out of range"
        ) from None


def _ceil_away(q: Fraction) -> int:
    """Round to an integer away from zero, as Quantity.ScaledValue does."""
    n, d = q.numerator, q.denominator
    if n >= 0:
        return -(-n // d)
    return -((d - 1 - n) // d)


def to_milli(q: Fraction) -> int:
    """Quantity.MilliValue: q * 1000 rounded up (away from zero): "1.1m" -> 2."""
    return _ceil_away(q * 1000)


def to_units(q: Fraction) -> int:
    """Quantity.Value: q rounded up (away from zero): "0.5" -> 1."""
    return _ceil_away(q)


def canonical_amount(resource_name: str, value: object, *, field: str) -> int:
    """The integer the core stores for `value` of `resource_name`: millicores for cpu, base
    units (bytes, counts) for everything else. Rejects malformed, negative and beyond-int64
    amounts with a QuantityError naming `field`."""
    is_cpu = resource_name == "cpu"
    if isinstance(value, str):
        cache = _MILLI_CACHE if is_cpu else _UNITS_CACHE
        cached = cache.get(value)
        if cached is not None:
            return cached
    elif type(value) is int and 0 <= value <= INT64_MAX // 1000:
        return value * 1000 if is_cpu else value
    q = parse_quantity(value, field=field)  # type: ignore[arg-type]
    if q < 0:
        raise QuantityError(
            field=field, value=value, reason=f"quantity {_show(value)} must not be negative"
        )
    amount = to_milli(q) if is_cpu else to_units(q)
    if amount > INT64_MAX:
        raise QuantityError(
            field=field, value=value, reason=f"quantity {_show(value)} out of range"
        )
    if isinstance(value, str):
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[value] = amount
    return amount
