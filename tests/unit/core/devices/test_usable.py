"""`usable.unusable_reason`: the one predicate the allocator asks before using a device
for a request. Taints are matched as kube matches them; features splitsched does not
implement yet keep the device out; capacity requests must fit in a device not shared."""

from __future__ import annotations

from fractions import Fraction

import pytest

from splitsched.core.devices import model, usable

GI = 2**30
UNHEALTHY = model.DeviceTaint("example.com/unhealthy", "ecc", model.TAINT_NO_SCHEDULE)


def spec(*tolerations: model.DeviceToleration, **capacity: Fraction) -> model.RequestSpec:
    return model.RequestSpec(
        "gpu", "gpu-class", tolerations=tolerations, capacity_requests=dict(capacity)
    )


def gpu(*taints: model.DeviceTaint, **fields: object) -> model.Device:
    return model.Device("gpu-0", taints=taints, **fields)  # type: ignore[arg-type]


def test_a_plain_device_is_usable() -> None:
    assert usable.unusable_reason(gpu(), spec()) == ""


@pytest.mark.parametrize("effect", [model.TAINT_NO_SCHEDULE, model.TAINT_NO_EXECUTE])
def test_a_blocking_taint_keeps_a_request_that_does_not_tolerate_it_away(effect: str) -> None:
    taint = model.DeviceTaint("example.com/unhealthy", "ecc", effect)
    reason = usable.unusable_reason(gpu(taint), spec())
    assert reason == f"device gpu-0 has taint example.com/unhealthy=ecc:{effect}, not tolerated"


@pytest.mark.parametrize("effect", ["None", "PreferNoSchedule", "SomethingNew"])
def test_other_effects_are_informational(effect: str) -> None:
    taint = model.DeviceTaint("example.com/unhealthy", "ecc", effect)
    assert usable.unusable_reason(gpu(taint), spec()) == ""


TOLERATIONS = [
    # (toleration, tolerates UNHEALTHY)
    (model.DeviceToleration("example.com/unhealthy", "Equal", "ecc", "NoSchedule"), True),
    (model.DeviceToleration("example.com/unhealthy", "", "ecc"), True),  # "" means Equal
    (model.DeviceToleration("example.com/unhealthy", "Equal", "other"), False),
    (model.DeviceToleration("example.com/unhealthy", "Exists"), True),
    (model.DeviceToleration("example.com/unhealthy", "Exists", effect="NoExecute"), False),
    (model.DeviceToleration("example.com/other", "Exists"), False),
    (model.DeviceToleration("", "Exists"), True),  # tolerates every taint
    (model.DeviceToleration("", "Equal", "ecc"), True),  # any key, this value (as kube)
    (model.DeviceToleration("example.com/unhealthy", "Gt", "ecc"), False),  # unknown operator
]


@pytest.mark.parametrize(("toleration", "tolerated"), TOLERATIONS)
def test_tolerations_match_as_kube_matches_them(
    toleration: model.DeviceToleration, tolerated: bool
) -> None:
    assert usable.tolerates(toleration, UNHEALTHY) is tolerated
    reason = usable.unusable_reason(gpu(UNHEALTHY), spec(toleration))
    assert (reason == "") is tolerated


def test_every_blocking_taint_must_be_tolerated() -> None:
    second = model.DeviceTaint("example.com/draining", "", model.TAINT_NO_EXECUTE)
    one = model.DeviceToleration("example.com/unhealthy", "Exists")
    assert "example.com/draining:NoExecute" in usable.unusable_reason(
        gpu(UNHEALTHY, second), spec(one)
    )
    both = model.DeviceToleration("example.com/draining", "Exists")
    assert usable.unusable_reason(gpu(UNHEALTHY, second), spec(one, both)) == ""


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"consumes_counters": (model.CounterSet("gpu-0", {"sms": Fraction(54)}),)}, "counters"),
        ({"allow_multiple_allocations": True}, "multiple allocations"),
        ({"binding_conditions": ("dra.example.com/attached",)}, "binding conditions"),
        ({"binding_failure_conditions": ("dra.example.com/failed",)}, "binding conditions"),
        ({"binds_to_node": True}, "binds to the node"),
    ],
)
def test_features_not_implemented_yet_keep_the_device_out(
    fields: dict[str, object], words: str
) -> None:
    reason = usable.unusable_reason(gpu(**fields), spec())
    assert words in reason and reason.endswith("which splitsched does not support yet")


def test_capacity_requests_must_exist_on_the_device_and_fit() -> None:
    device = model.Device(
        "gpu-0",
        capacity={
            "gpu.example.com/memory": Fraction(80 * GI),
            "example.com/bandwidth": Fraction(9),
        },
    )
    fits = [
        {"memory": Fraction(80 * GI)},  # the driver's domain, left out
        {"gpu.example.com/memory": Fraction(40 * GI)},
        {"example.com/bandwidth": Fraction(9), "memory": Fraction(1)},
    ]
    for requests in fits:
        assert usable.unusable_reason(device, spec(**requests)) == ""
    assert usable.unusable_reason(device, spec(memory=Fraction(81 * GI))) == (
        "device gpu-0 has less memory than requested"
    )
    assert usable.unusable_reason(device, spec(cores=Fraction(1))) == (
        "device gpu-0 has no capacity cores"
    )
    assert usable.unusable_reason(device, spec(**{"other.com/memory": Fraction(1)})) != ""


def test_a_capacity_name_two_domains_share_is_not_guessed() -> None:
    device = model.Device(
        "gpu-0", capacity={"gpu.example.com/memory": Fraction(8), "other.com/memory": Fraction(8)}
    )
    assert usable.unusable_reason(device, spec(memory=Fraction(1))) == (
        "device gpu-0 has no capacity memory"
    )
    assert usable.unusable_reason(device, spec(**{"other.com/memory": Fraction(1)})) == ""
