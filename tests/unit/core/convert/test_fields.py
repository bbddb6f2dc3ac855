"""The typed readers every converter uses: defaults for absent fields, error paths."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import pytest

from splitsched.core.convert import fields
from splitsched.core.convert.fields import BadField


@pytest.mark.parametrize(
    ("path", "prefix", "joined"),
    [
        ("", "spec.tolerations[1]", "spec.tolerations[1]"),
        ("operator", "spec.tolerations[1]", "spec.tolerations[1].operator"),
        ("[2].key", "matchExpressions", "matchExpressions[2].key"),
        ("a.b", "x", "x.a.b"),
    ],
)
def test_within_reroots_the_path(path: str, prefix: str, joined: str) -> None:
    error = fields.within(BadField(path, "bad"), prefix)
    assert (error.path, error.problem, error.detail) == (joined, "bad", f"{joined}: bad")


def test_each_names_the_item_and_at_names_the_part() -> None:
    def positive(value: object) -> int:
        return fields.as_int(value, "n", low=1, high=9)

    assert fields.each(None, "items", positive) == ()
    assert fields.each([1, 2], "items", positive) == (1, 2)
    with pytest.raises(BadField) as info:
        fields.each([1, 0], "items", positive)
    assert info.value.detail == "items[1].n: 0 is out of range [1, 9]"
    with pytest.raises(BadField) as info:
        fields.at(0, "spec", positive)
    assert info.value.detail == "spec.n: 0 is out of range [1, 9]"


Reader = Callable[[object, str], Any]

ABSENT: list[tuple[Reader, Any]] = [
    (fields.as_object, {}),
    (fields.as_list, []),
    (fields.as_str, ""),
    (fields.as_bool, False),
    (fields.as_str_map, {}),
    (fields.as_str_tuple, ()),
    (fields.as_resources, {}),
    (fields.requests_with_limits, {}),
    (fields.as_timestamp, 0.0),
]


@pytest.mark.parametrize(("read", "default"), ABSENT, ids=[r.__name__ for r, _ in ABSENT])
def test_null_reads_as_the_kubernetes_default(read: Reader, default: Any) -> None:
    assert read(None, "f") == default


WRONG: list[tuple[Reader, object, str]] = [
    (fields.as_object, [], "f: expected an object, got a list"),
    (fields.as_list, {}, "f: expected a list, got an object"),
    (fields.as_str, 5, "f: expected a string, got number 5"),
    (fields.as_bool, "yes", "f: expected a boolean, got string 'yes'"),
    (fields.as_str_map, {"a": 1}, "f[a]: expected a string, got number 1"),
    (fields.as_str_tuple, ["a", None], "f[1]: expected a string, got null"),
    (fields.as_resources, "1Gi", "f: expected a map of quantities, got string '1Gi'"),
    (fields.as_resources, {"cpu": "12XB"}, "f.cpu: invalid quantity '12XB'"),
    (fields.requests_with_limits, {"limits": {"memory": "-1"}}, "f.limits.memory:"),
    (fields.as_timestamp, "yesterday", "f: invalid RFC3339 timestamp 'yesterday'"),
    (fields.as_timestamp, True, "f: expected an RFC3339 timestamp, got a boolean"),
]


@pytest.mark.parametrize(("read", "value", "message"), WRONG)
def test_wrong_values_name_the_field(read: Reader, value: object, message: str) -> None:
    with pytest.raises(BadField) as info:
        read(value, "f")
    assert info.value.detail.startswith(message)


def test_ints_bools_and_enums() -> None:
    assert fields.as_int(7, "f", low=0, high=7) == 7
    for value, problem in [(True, "expected an integer, got a boolean"), (8, "8 is out of range")]:
        with pytest.raises(BadField, match=problem):
            fields.as_int(value, "f", low=0, high=7)
    allowed = frozenset({"TCP", "UDP"})
    assert fields.as_enum(None, "f", allowed, "TCP") == "TCP"
    with pytest.raises(BadField) as info:
        fields.as_enum("tcp", "f", allowed, "TCP")
    assert info.value.detail == "f: unsupported value 'tcp': expected one of ['TCP', 'UDP']"


def test_requests_default_to_limits_per_resource() -> None:
    value = {"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "1Ki"}}
    assert fields.requests_with_limits(value, "resources") == {"cpu": 250, "memory": 1024}


def test_timestamps_without_a_zone_are_utc() -> None:
    assert fields.as_timestamp("2025-01-01T00:00:00Z", "f") == 1735689600.0
    assert fields.as_timestamp("2025-01-01T00:00:00", "f") == 1735689600.0
    assert fields.as_timestamp(date(2025, 1, 1), "f") == 1735689600.0


def test_named_objects_need_a_name() -> None:
    obj = {"metadata": {"name": "web"}}
    assert fields.named(obj) == (obj, obj["metadata"], "web")
    for bad, detail in [
        ([], "expected an object, got a list"),
        ({}, "metadata: expected an object, got null"),
        ({"metadata": {}}, "metadata.name: required"),
        ({"metadata": {"name": ""}}, "metadata.name: expected a non-empty string"),
    ]:
        with pytest.raises(BadField) as info:
            fields.named(bad)
        assert info.value.detail == detail
