"""The rewrite that makes a missing domain read as an empty map: which lookups it takes,
what it leaves alone, and that what it writes means the same for the domains a device has."""

from __future__ import annotations

import cel
import pytest

from splitsched.core.devices import cel_domains

A = "device.attributes"


def empty_or(target: str, domain: str) -> str:
    return f"(({domain}) in {target} ? {target}[{domain}] : {{}})"


LITERAL = '"a.io"'


@pytest.mark.parametrize(
    ("source", "rewritten"),
    [
        (f"{A}[{LITERAL}].x == 1", empty_or(A, LITERAL) + ".x == 1"),
        (
            "has(device.capacity['a.io'].mem)",
            "has(" + empty_or("device.capacity", "'a.io'") + ".mem)",
        ),
        (f"has({A}[device.driver].x)", f"has({empty_or(A, 'device.driver')}.x)"),
        # Spaces and comments between the tokens; the comment stays where it was.
        (
            "device . attributes [ // the domain\n " + LITERAL + " ] .x",
            empty_or(A, " // the domain\n " + LITERAL + " ") + " .x",
        ),
        # A lookup inside the domain expression is rewritten too.
        (
            f"{A}[{A}[{LITERAL}].other].x",
            empty_or(A, empty_or(A, LITERAL) + ".other") + ".x",
        ),
    ],
)
def test_each_domain_lookup_on_the_device_reads_a_missing_domain_as_empty(
    source: str, rewritten: str
) -> None:
    assert cel_domains.with_empty_domains(source) == rewritten


@pytest.mark.parametrize(
    "source",
    [
        'device.driver == "a.io"',
        '"b.io" in device.attributes',
        # Inside string literals of every kind, nothing is code.
        '"device.attributes[\\"a\\"]" == r\'device.attributes["b"]\'',
        '"""device.attributes["a"]""" != b"device.capacity[\'a\']"',
        # Not the `device` variable, or not one of its domain maps.
        'x.device.attributes["a.io"]',
        'device.other["a.io"]',
        "device.attributes.exists(d, d == 'a.io')",
        # A field-style domain is left as written (a known difference).
        "device.attributes.gpu.model",
    ],
)
def test_what_is_not_a_domain_lookup_on_the_device_is_left_alone(source: str) -> None:
    assert cel_domains.with_empty_domains(source) == source


def test_text_that_cannot_be_read_is_left_alone() -> None:
    assert cel_domains.with_empty_domains('device.attributes["a') == 'device.attributes["a'
    assert cel_domains.with_empty_domains('device.attributes["a"') == 'device.attributes["a"'


def test_a_rewrite_that_would_grow_too_much_is_dropped() -> None:
    nested = '"a"'
    for _ in range(20):  # each level doubles the text
        nested = f"{A}[{nested}].d"
    assert cel_domains.with_empty_domains(nested) == nested


@pytest.mark.parametrize(
    "source",
    [
        f'{A}["a.io"].x',
        f'{A}["a.io"]["x"] + {A}[device.driver].x',
        f"{A}['a.io'].size()",
        f'{A}["a.io"].exists(k, k == "x")',
        f'"x" in {A}["a.io"]',
    ],
)
def test_for_a_domain_the_device_has_the_rewrite_gives_the_same_answer(source: str) -> None:
    context = {"device": {"driver": "a.io", "attributes": {"a.io": {"x": 7}}, "capacity": {}}}
    rewritten = cel_domains.with_empty_domains(source)
    assert rewritten != source
    assert cel.evaluate(rewritten, context) == cel.evaluate(source, context)
