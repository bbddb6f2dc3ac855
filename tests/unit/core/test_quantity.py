"""Quantity parsing against resource.ParseQuantity's grammar, rounding and limits."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from splitsched.core.quantity import (
    QuantityError,
    canonical_amount,
    parse_quantity,
    to_milli,
    to_units,
)

KI, MI, GI, TI, PI, EI = (1024**k for k in range(1, 7))

VALID = [
    ("0", Fraction(0)),
    ("0m", Fraction(0)),
    ("0Ki", Fraction(0)),
    ("0T", Fraction(0)),
    ("1", Fraction(1)),
    ("1Ki", Fraction(KI)),
    ("8Ki", Fraction(8 * KI)),
    ("7Mi", Fraction(7 * MI)),
    ("6Gi", Fraction(6 * GI)),
    ("5Ti", Fraction(5 * TI)),
    ("4Pi", Fraction(4 * PI)),
    ("3Ei", Fraction(3 * EI)),
    ("5n", Fraction(5, 10**9)),
    ("4u", Fraction(4, 10**6)),
    ("3m", Fraction(3, 1000)),
    ("8k", Fraction(8000)),
    ("7M", Fraction(7 * 10**6)),
    ("6G", Fraction(6 * 10**9)),
    ("5T", Fraction(5 * 10**12)),
    ("2P", Fraction(2 * 10**15)),
    ("1E", Fraction(10**18)),  # E alone is the exa suffix...
    ("12E", Fraction(12 * 10**18)),
    ("1E-3", Fraction(1, 1000)),  # ...E followed by an integer is an exponent
    ("1e3", Fraction(1000)),
    ("1E6", Fraction(10**6)),
    ("1.3E+6", Fraction(1_300_000)),
    ("1.2e3", Fraction(1200)),
    ("1e03", Fraction(1000)),
    ("100.035k", Fraction(100035)),
    ("0.001", Fraction(1, 1000)),
    ("0.0005k", Fraction(1, 2)),
    ("0.5e-1", Fraction(1, 20)),
    ("10.035M", Fraction(10_035_000)),
    ("6.987654321G", Fraction(6_987_654_321)),
    ("1.01E", Fraction(101 * 10**16)),
    ("100.035Ki", Fraction(100035 * KI, 1000)),
    ("0.5Mi", Fraction(MI // 2)),
    (".001", Fraction(1, 1000)),  # leading and trailing dots
    (".0001k", Fraction(1, 10)),
    ("1.", Fraction(1)),
    ("1.G", Fraction(10**9)),
    ("+5", Fraction(5)),
    ("-5m", Fraction(-5, 1000)),
    ("-.5", Fraction(-1, 2)),
    ("007", Fraction(7)),
    # ParseQuantity rounds non-zero values up (away from zero) to a whole nano.
    ("3.001n", Fraction(4, 10**9)),
    ("1.1E-9", Fraction(2, 10**9)),
    ("0.0000000001", Fraction(1, 10**9)),
    ("0.9n", Fraction(1, 10**9)),
    ("0.00000012345", Fraction(124, 10**9)),
    ("0.000000000001Ki", Fraction(2, 10**9)),
    ("-3.001n", Fraction(-4, 10**9)),
    ("1e-2147483647", Fraction(1, 10**9)),
]

INVALID = [
    "",
    "abc",
    "aoeu",
    "1.2.3",
    "1.1.M",
    "1+1.0M",
    "1Kb",
    "1 Ki",
    " 1",
    "1 ",
    "--1",
    "1e",
    "1e+",
    "-3.01e-",
    "1ee3",
    "1e3.5",
    "Ki",
    "m",
    ".",
    "-",
    "0.1mi",
    "0.1am",
    ".5i",
    "1i",
    "1K",
    "1mi",
    "1KI",
    "1e4294967297",  # exponent past int32
    "1E2147483648",
    "\uff11",  # full-width digit one: Go only knows ASCII digits
    "1\u0660",  # Arabic-Indic digit zero
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_quantities_parse_exactly(text: str, expected: Fraction) -> None:
    assert parse_quantity(text, field="f") == expected


@pytest.mark.parametrize("text", INVALID)
def test_invalid_quantities_name_field_and_value(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text, field="spec.containers[0].resources.requests.cpu")
    assert str(info.value) == (
        f"spec.containers[0].resources.requests.cpu: invalid quantity {text!r}"
    )
    assert isinstance(info.value, ValueError)


def test_json_numbers() -> None:
    assert parse_quantity(3, field="f") == 3
    assert parse_quantity(0.1, field="f") == Fraction(1, 10)  # its repr, not its binary value
    assert parse_quantity(1e20, field="f") == 10**20
    assert parse_quantity(2.5e-3, field="f") == Fraction(1, 400)
    for bad in (float("nan"), float("inf"), True, None, [1], {"a": 1}):
        with pytest.raises(QuantityError, match="f: invalid quantity"):
            parse_quantity(bad, field="f")  # type: ignore[arg-type]


def test_rounding_up_to_milli_and_units() -> None:
    assert to_milli(parse_quantity("1.1m", field="f")) == 2
    assert to_milli(parse_quantity("0.5", field="f")) == 500
    assert to_milli(parse_quantity("1n", field="f")) == 1
    assert to_units(parse_quantity("0.5", field="f")) == 1
    assert to_units(parse_quantity("1001m", field="f")) == 2
    assert to_units(parse_quantity("1Ki", field="f")) == 1024
    # Away from zero for negatives, like Quantity.Value.
    assert to_units(Fraction(-3, 2)) == -2
    assert to_milli(Fraction(-11, 10000)) == -2


def test_canonical_amount() -> None:
    assert canonical_amount("cpu", "1.1m", field="f") == 2
    assert canonical_amount("cpu", "2", field="f") == 2000
    assert canonical_amount("cpu", "100m", field="f") == 100
    assert canonical_amount("cpu", 3, field="f") == 3000
    assert canonical_amount("cpu", 0.25, field="f") == 250
    assert canonical_amount("memory", "0.5", field="f") == 1
    assert canonical_amount("memory", "1Gi", field="f") == GI
    assert canonical_amount("memory", "1G", field="f") == 10**9
    assert canonical_amount("memory", "128974848", field="f") == 128974848
    assert canonical_amount("memory", "129e6", field="f") == 129_000_000
    assert canonical_amount("nvidia.com/gpu", "1", field="f") == 1
    assert canonical_amount("memory", "7Ei", field="f") == 7 * EI
    assert canonical_amount("memory", "9223372036854775807", field="f") == 2**63 - 1
    # Cached results are the same as fresh ones, per resource kind.
    assert canonical_amount("cpu", "1.1m", field="f") == 2
    assert canonical_amount("memory", "1.1m", field="f") == 1


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("cpu", "-1", "must not be negative"),
        ("memory", "-1Mi", "must not be negative"),
        ("memory", -5, "must not be negative"),
        ("memory", "1e400", "out of range"),
        ("memory", "99999999999Ei", "out of range"),
        ("memory", "8Ei", "out of range"),  # 2**63: Go would cap it at 2**63-1
        ("memory", "9223372036854775808", "out of range"),
        ("cpu", "9223372036854775807", "out of range"),  # fine as units, not as millis
        ("memory", 10**30, "out of range"),
        ("memory", "1e99999", "out of range"),
        ("cpu", "12XB", "invalid quantity"),
    ],
)
def test_canonical_amount_rejects(name: str, value: object, problem: str) -> None:
    with pytest.raises(QuantityError) as info:
        canonical_amount(name, value, field="spec.overhead.x")
    message = str(info.value)
    assert message.startswith("spec.overhead.x: ")
    assert problem in message
    assert repr(value) in message


SUFFIXES = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": KI,
    "Mi": MI,
    "Gi": GI,
    "Ti": TI,
    "Pi": PI,
    "Ei": EI,
}
SMALL_SUFFIXES = {"m": 3, "u": 6, "n": 9}


@given(st.integers(min_value=-(10**20), max_value=10**20), st.sampled_from(sorted(SUFFIXES)))
def test_integer_with_suffix_is_exact(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}", field="f") == n * SUFFIXES[suffix]


@given(st.integers(min_value=0, max_value=10**20), st.sampled_from(sorted(SMALL_SUFFIXES)))
def test_integer_with_fractional_suffix_is_exact(n: int, suffix: str) -> None:
    assert parse_quantity(f"{n}{suffix}", field="f") == Fraction(n, 10 ** SMALL_SUFFIXES[suffix])


@given(st.integers(min_value=0, max_value=10**15), st.integers(min_value=-9, max_value=30))
def test_exponent_form_is_exact(n: int, exponent: int) -> None:
    assert parse_quantity(f"{n}e{exponent}", field="f") == n * Fraction(10) ** exponent


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=10**9 - 1))
def test_milli_ceiling(whole: int, nanos: int) -> None:
    text = f"{whole}.{nanos:09d}"
    total_nanos = whole * 10**9 + nanos
    assert canonical_amount("cpu", text, field="f") == -(-total_nanos // 10**6)
    assert canonical_amount("memory", text, field="f") == -(-total_nanos // 10**9)


QUANTITY_ALPHABET = "0123456789.+-eEinumkKMGTP iX\u0661"


@given(st.one_of(st.text(max_size=30), st.text(alphabet=QUANTITY_ALPHABET, max_size=30)))
def test_random_text_parses_or_raises_quantity_error(text: str) -> None:
    try:
        result = parse_quantity(text, field="f")
    except QuantityError as e:
        assert str(e).startswith("f: ")
    else:
        assert isinstance(result, Fraction)


@given(st.text(alphabet=QUANTITY_ALPHABET, max_size=30), st.sampled_from(["cpu", "memory"]))
def test_random_text_canonical_amount_is_an_int64_or_raises(text: str, name: str) -> None:
    try:
        result = canonical_amount(name, text, field="f")
    except QuantityError:
        return
    assert isinstance(result, int)
    assert 0 <= result < 2**63


def test_long_digit_strings() -> None:
    # More digits than int() accepts by default; still exact (rounded up to 1n).
    assert parse_quantity("0." + "0" * 5000 + "1", field="f") == Fraction(1, 10**9)
    assert parse_quantity("1." + "0" * 5000 + "1", field="f") == 1 + Fraction(1, 10**9)
    assert parse_quantity("0." + "3" * 5000, field="f") == Fraction(333333334, 10**9)
    assert parse_quantity("0" * 5000 + "7", field="f") == 7
    with pytest.raises(QuantityError, match="out of range"):
        parse_quantity("9" * 5000, field="f")
