"""VolumeZone: kube-scheduler's volumezone cases (volume_zone_test.go): a bound volume's
zone and region labels against the node's, GA and beta forms, and the PreFilter messages
for unbound claims."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from splitsched.core import framework, models, storage
from splitsched.core.plugins.volume_zone import (
    BETA_REGION,
    BETA_ZONE,
    REASON,
    REGION,
    ZONE,
    VolumeZone,
)
from tests.support.builders import bools, fresh_state, node
from tests.support.storage import bound_pair, claim, claim_pod, storage_class, storage_table


def run(
    volume_labels: dict[str, str], node_labels: Sequence[dict[str, str]]
) -> tuple[framework.Status, list[bool]]:
    c, v = bound_pair("pvc", "pv", labels=volume_labels)
    table = storage_table([node(f"n{i}", labels=lb) for i, lb in enumerate(node_labels)], [c, v])
    state = fresh_state()
    p = claim_pod("pod", "pvc")
    status = VolumeZone().pre_filter(state, p, table)
    return status, bools(VolumeZone().filter(state, p, table))


@pytest.mark.parametrize(
    ("volume_labels", "node_labels", "fits"),
    [
        ({BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a", "x": "y"}, True),
        ({BETA_REGION: "us-west1"}, {BETA_REGION: "us-west1"}, True),
        ({BETA_REGION: "us-west1"}, {BETA_REGION: "no_us-west1"}, False),
        ({BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "no_us-west1-a"}, False),
        ({ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),
        ({REGION: "us-west1"}, {REGION: "us-west1"}, True),
        ({REGION: "us-west1"}, {REGION: "no_us-west1"}, False),
        ({ZONE: "us-west1-a"}, {ZONE: "no_us-west1-a"}, False),
        ({ZONE: "us-west1-a", REGION: "us-west1-a"}, {ZONE: "us-west1-a"}, False),
        ({ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a"}, False),
        ({BETA_ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),
        ({BETA_ZONE: "us-west1-a"}, {ZONE: "us-west1-b"}, False),
        ({ZONE: "a__b"}, {ZONE: "b"}, True),  # several zones in one value
        ({ZONE: "a__"}, {ZONE: "c"}, True),  # an unparsable value is ignored
        ({ZONE: "us-west1-a"}, {"x": "y"}, True),  # a node without zone labels fits
    ],
)
def test_single_zone(
    volume_labels: dict[str, str], node_labels: dict[str, str], fits: bool
) -> None:
    _status, got = run(volume_labels, [node_labels])
    assert got == [fits]


def test_volume_without_topology_labels_is_skipped() -> None:
    status, got = run({"other": "x"}, [{ZONE: "a"}])
    assert status.code is framework.Code.SKIP and got == [True]


def test_reason_wording() -> None:
    assert REASON == "node(s) had no available volume zone"
    assert VolumeZone.resolvable_by_preemption is False


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        ([claim("pvc")], "PersistentVolumeClaim had no pv name and storageClass name"),
        ([claim("pvc", cls="gone")], 'storageclass.storage.k8s.io "gone" not found'),
        ([claim("pvc", cls="imm"), storage_class("imm", wffc=False)],
         "PersistentVolume had no name"),
        ([claim("pvc", volume="pv-gone", bound=True)], 'persistentvolume "pv-gone" not found'),
        ([], 'persistentvolumeclaim "pvc" not found'),
    ],
)  # fmt: skip
def test_prefilter_messages(objects: list[storage.StorageObject], message: str) -> None:
    table = storage_table([node("n0")], objects)
    status = VolumeZone().pre_filter(fresh_state(), claim_pod("pod", "pvc"), table)
    assert status.code is framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (message,)


def test_an_unbound_wait_for_first_consumer_claim_is_left_to_volume_binding() -> None:
    table = storage_table([node("n0")], [claim("pvc", cls="wait"), storage_class("wait")])
    status = VolumeZone().pre_filter(fresh_state(), claim_pod("pod", "pvc"), table)
    assert status.code is framework.Code.SKIP


def test_ephemeral_volumes_are_not_looked_at() -> None:
    table = storage_table([node("n0")])
    p = claim_pod("pod", ephemeral=["scratch"])
    assert VolumeZone().pre_filter(fresh_state(), p, table).code is framework.Code.SKIP
    assert VolumeZone().pre_filter(fresh_state(), models.Pod("u", "d", "p"), table).code is (
        framework.Code.SKIP
    )
