"""spec.schedulingGates -> `Pod.scheduling_gates`: the names in order, errors that name the
field, and a malformed pod that is still gated keeps its readable gates (it must be left
alone like any gated pod, not reported unschedulable while gated)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core.convert import ConversionError, pod_from_k8s


def gated_pod(gates: object) -> dict[str, Any]:
    return {
        "metadata": {"name": "train-0", "namespace": "shop", "uid": "u-1"},
        "spec": {
            "schedulerName": "splitsched",
            "schedulingGates": gates,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }


def test_gate_names_in_order() -> None:
    pod = pod_from_k8s(gated_pod([{"name": "example.com/b"}, {"name": "example.com/a"}]))
    assert pod.scheduling_gates == ("example.com/b", "example.com/a")
    assert pod.invalid_reason == ""


@pytest.mark.parametrize("gates", [None, []])
def test_no_gates(gates: object) -> None:
    assert pod_from_k8s(gated_pod(gates)).scheduling_gates == ()


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ("x", "spec.schedulingGates: expected a list, got string 'x'"),
        (["x"], "spec.schedulingGates[0]: expected an object, got string 'x'"),
        ([{"name": ""}], "spec.schedulingGates[0].name: required"),
        ([{"name": "a"}, {}], "spec.schedulingGates[1].name: required"),
        ([{"name": 7}], "spec.schedulingGates[0].name: expected a string, got number 7"),
    ],
)
def test_malformed_gates_name_the_field(gates: object, message: str) -> None:
    with pytest.raises(ConversionError) as info:
        pod_from_k8s(gated_pod(gates))
    assert str(info.value) == f"pod shop/train-0: {message}"


def test_a_malformed_gated_pod_keeps_its_readable_gates() -> None:
    obj = gated_pod([{"name": "example.com/a"}])
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    pod = pod_from_k8s(obj, strict=False)
    assert "requests.cpu: invalid quantity 'lots'" in pod.invalid_reason
    assert pod.scheduling_gates == ("example.com/a",)
    assert pod.scheduler_name == "splitsched"


def test_unreadable_gates_make_an_invalid_pod_not_a_gated_one() -> None:
    pod = pod_from_k8s(gated_pod([{"name": 7}, "x"]), strict=False)
    assert "spec.schedulingGates[0].name" in pod.invalid_reason
    assert pod.scheduling_gates == ()


GARBAGE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=6),
    st.lists(st.one_of(st.none(), st.text(max_size=3), st.integers()), max_size=2),
    st.dictionaries(st.sampled_from(["name", "x"]), st.one_of(st.text(max_size=3), st.none())),
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(GARBAGE, st.lists(GARBAGE, max_size=3)))
def test_any_gates_value_converts_or_names_the_field(gates: object) -> None:
    pod = pod_from_k8s(gated_pod(gates), strict=False)
    assert pod.name == "train-0"
    if pod.invalid_reason:
        assert pod.invalid_reason.startswith("pod shop/train-0: spec.schedulingGates")
    assert all(isinstance(g, str) and g for g in pod.scheduling_gates)
