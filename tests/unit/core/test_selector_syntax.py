"""The label-selector parser's rules as kube-scheduler applies them to node selector terms
(apimachinery's content.IsLabelKey / IsLabelValue and labels.NewRequirement, v0.36.3),
and its error messages as Go prints them."""

from __future__ import annotations

import pytest

from splitsched.core import models
from splitsched.core.selector_syntax import (
    label_key_errors,
    label_value_errors,
    preferred_terms_error,
    term_errors,
    term_parses,
)

R = models.NodeSelectorRequirement
T = models.NodeSelectorTerm
VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    "value", ["", "a", "A-b_c.d", "1", "x" * 63, "0123456789", "a.b"]
)  # fmt: skip
def test_label_values_kube_accepts(value: str) -> None:
    assert label_value_errors(value) == []


@pytest.mark.parametrize("value", ["-a", "a-", "a b", "a/b", "é", "x" * 64, "+1", ".a"])
def test_label_values_kube_refuses(value: str) -> None:
    assert label_value_errors(value)


@pytest.mark.parametrize(
    "key",
    ["a", "zone", "topology.kubernetes.io/zone", "example.com/My_Name", "a" * 63, "x/" + "a" * 63],
)
def test_label_keys_kube_accepts(key: str) -> None:
    assert label_key_errors(key) == []


@pytest.mark.parametrize(
    ("key", "error"),
    [
        ("", "name part must be non-empty"),
        ("a/b/c", "a valid label key must consist of"),
        ("/a", "prefix part must be non-empty"),
        ("Example.com/a", "prefix part a lowercase RFC 1123 subdomain"),
        ("a" * 64, "name part must be no more than 63 bytes"),
        ("bad key", "name part must consist of"),
    ],
)
def test_label_keys_kube_refuses(key: str, error: str) -> None:
    assert any(e.startswith(error) for e in label_key_errors(key))


def test_messages_are_gos() -> None:
    term = T(match_expressions=(R("zone", "In", ("a", "bad value")),))
    assert term_errors(term, "[0]") == [
        f'[0].matchExpressions[0].values[1][zone]: Invalid value: "bad value": {VALUE_MSG}'
    ]
    assert term_errors(T(match_expressions=(R("zone", "In", ()),))) == [
        "matchExpressions[0].values: Invalid value: null: "
        "for 'in', 'notin' operators, values set can't be empty"
    ]
    long = "x" * 64
    assert term_errors(T(match_expressions=(R("zone", "NotIn", (long,)),))) == [
        f'matchExpressions[0].values[0][zone]: Invalid value: "{long}": '
        "must be no more than 63 bytes"
    ]
    fields = T(match_fields=(R("metadata.name", "In", ("a", "b")),))
    assert term_errors(fields) == [
        'matchFields[0].values: Invalid value: ["a","b"]: must have one element'
    ]


def test_several_errors_print_as_a_flattened_aggregate() -> None:
    bad = R("gen", "Gt", ("x",))
    prefs = (
        models.PreferredSchedulingTerm(1, T(match_expressions=(bad,))),
        models.PreferredSchedulingTerm(0, T(match_expressions=(bad,))),  # weight 0: skipped
        models.PreferredSchedulingTerm(2, T()),  # empty: skipped
        models.PreferredSchedulingTerm(3, T(match_expressions=(R("k", "Lt", ("1", "2")),))),
    )
    assert preferred_terms_error(prefs) == (
        "[[0].matchExpressions[0].values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, "
        "the value must be an integer, [3].matchExpressions[0].values: Invalid value: "
        "[\"1\",\"2\"]: for 'Gt', 'Lt' operators, exactly one value is required]"
    )
    assert preferred_terms_error(prefs[1:3]) == ""


def test_term_parses_is_memoised_by_value() -> None:
    good = T(match_expressions=(R("zone", "In", ("a",)),))
    assert term_parses(good) and term_parses(T(match_expressions=(R("zone", "In", ("a",)),)))
    assert not term_parses(T(match_expressions=(R("zone", "In", ("a b",)),)))
