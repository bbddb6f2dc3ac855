"""NodeVolumeLimits: kube-scheduler's CSILimits cases (csi_test.go): a node attaches at
most its CSINode's count of a driver's volumes, the volumes of pods already there counted
once each; unbound claims count against their class's provisioner."""

from __future__ import annotations

from collections.abc import Sequence

from splitsched.core import framework, models, storage
from splitsched.core.plugins.node_volume_limits import (
    REASON,
    REASON_INVALID,
    NodeVolumeLimits,
)
from tests.support.builders import bools, fresh_state
from tests.support.storage import (
    bound_pair,
    claim,
    claim_pod,
    csi_node,
    host,
    storage_class,
    storage_table,
)

EBS = "ebs.csi.aws.com"
NODES = [host("a"), host("b")]


def csi_pair(n: int, driver: str = EBS) -> list[storage.StorageObject]:
    c, v = bound_pair(f"c{n}", f"pv{n}", csi_driver=driver)
    return [c, v]


def run(
    p: models.Pod, objects: Sequence[storage.StorageObject], pods: Sequence[models.Pod] = ()
) -> tuple[framework.Status, list[bool]]:
    table = storage_table(NODES, objects, pods)
    state = fresh_state()
    status = NodeVolumeLimits().pre_filter(state, p, table)
    if status.code is framework.Code.SKIP:
        return status, [True] * table.n
    return status, bools(NodeVolumeLimits().filter(state, p, table))


LIMIT_2 = [csi_node("a", ebs_csi_aws_com=2)]


def test_a_node_at_its_limit_takes_no_more_volumes() -> None:
    objects: list[storage.StorageObject] = [*LIMIT_2, *csi_pair(1), *csi_pair(2), *csi_pair(3)]
    on_a = [claim_pod("p1", "c1", node="a"), claim_pod("p2", "c2", node="a")]
    _, fits = run(claim_pod("new", "c3"), objects, on_a)
    assert fits == [False, True]  # b has no CSINode: no limit


def test_below_the_limit_fits() -> None:
    objects: list[storage.StorageObject] = [*LIMIT_2, *csi_pair(1), *csi_pair(2)]
    _, fits = run(claim_pod("new", "c2"), objects, [claim_pod("p1", "c1", node="a")])
    assert fits == [True, True]


def test_a_volume_already_attached_is_not_counted_twice() -> None:
    objects: list[storage.StorageObject] = [*LIMIT_2, *csi_pair(1), *csi_pair(2)]
    on_a = [claim_pod("p1", "c1", node="a"), claim_pod("p2", "c2", node="a")]
    _, fits = run(claim_pod("new", "c1"), objects, on_a)
    assert fits == [True, True]


def test_pods_sharing_a_volume_count_it_once() -> None:
    objects: list[storage.StorageObject] = [*LIMIT_2, *csi_pair(1), *csi_pair(2), *csi_pair(3)]
    on_a = [claim_pod("p1", "c1", node="a"), claim_pod("p2", "c1", node="a")]
    _, fits = run(claim_pod("new", "c3"), objects, on_a)
    assert fits == [True, True]


def test_other_drivers_do_not_count() -> None:
    objects: list[storage.StorageObject] = [
        *LIMIT_2,
        *csi_pair(1, "other.csi"),
        *csi_pair(2, "other.csi"),
        *csi_pair(3),
    ]
    on_a = [claim_pod("p1", "c1", node="a"), claim_pod("p2", "c2", node="a")]
    _, fits = run(claim_pod("new", "c3"), objects, on_a)
    assert fits == [True, True]


def test_two_new_volumes_beyond_the_limit() -> None:
    objects: list[storage.StorageObject] = [
        csi_node("a", ebs_csi_aws_com=1),
        *csi_pair(1),
        *csi_pair(2),
    ]
    _, fits = run(claim_pod("new", "c1", "c2"), objects)
    assert fits == [False, True]


def test_unbound_claims_count_against_their_class_provisioner() -> None:
    cls = storage_class("ebs", provisioner=EBS)
    objects: list[storage.StorageObject] = [
        *LIMIT_2,
        cls,
        claim("u1", cls="ebs"),
        claim("u2", cls="ebs"),
        *csi_pair(1),
    ]
    on_a = [claim_pod("p1", "u1", node="a"), claim_pod("p2", "u2", node="a")]
    _, fits = run(claim_pod("new", "c1"), objects, on_a)
    assert fits == [False, True]
    # An ephemeral volume's claim counts the same way.
    eph = claim("new-scratch", cls="ebs")
    _, fits = run(claim_pod("new", ephemeral=["scratch"]), [*objects, eph], on_a)
    assert fits == [False, True]


def test_volumes_without_a_csi_driver_and_missing_claims_count_nowhere() -> None:
    c, v = bound_pair("local", "pv-local")  # no spec.csi
    objects: list[storage.StorageObject] = [csi_node("a", ebs_csi_aws_com=0), c, v]
    status, fits = run(claim_pod("new", "local"), objects)
    assert status.code is framework.Code.SKIP and fits == [True, True]
    status, _ = run(claim_pod("new", "missing"), objects)
    assert status.code is framework.Code.SKIP


def test_no_csinode_anywhere_skips() -> None:
    status, _ = run(claim_pod("new", "c1"), csi_pair(1))
    assert status.code is framework.Code.SKIP


def test_reasons_and_an_unreadable_csinode() -> None:
    bad = storage.CSINode(name="b", invalid_reason="spec.drivers[0].allocatable.count: -1")
    objects: list[storage.StorageObject] = [*LIMIT_2, bad, *csi_pair(1), *csi_pair(2), *csi_pair(3)]
    on_a = [claim_pod("p1", "c1", node="a"), claim_pod("p2", "c2", node="a")]
    table = storage_table(NODES, objects, on_a)
    state, p = fresh_state(), claim_pod("new", "c3")
    assert NodeVolumeLimits().pre_filter(state, p, table).ok
    assert bools(NodeVolumeLimits().filter(state, p, table)) == [False, False]
    assert NodeVolumeLimits().failure_reasons(state, p, table, [0, 1]) == [
        (REASON,),
        (REASON_INVALID,),
    ]
    assert REASON == "node(s) exceed max volume count"
    assert NodeVolumeLimits.resolvable_by_preemption is True
