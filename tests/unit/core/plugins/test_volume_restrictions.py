"""VolumeRestrictions: a ReadWriteOncePod claim used by a pod on a node keeps every other
pod of it out (Unschedulable: preemption may free it); a missing claim is named first."""

from __future__ import annotations

from splitsched.core import framework
from splitsched.core.plugins.volume_restrictions import REASON, VolumeRestrictions
from splitsched.core.storage import ClaimRef
from tests.support.builders import algorithm_over, bools, fresh_state
from tests.support.storage import RWOP, claim, claim_pod, host, storage_table, volume

NODES = [host("a"), host("b")]


def test_a_claim_in_use_rejects_every_node() -> None:
    user = claim_pod("user", "solo", node="a")
    table = storage_table(NODES, [claim("solo", modes=[RWOP])], [user])
    state, p = fresh_state(), claim_pod("second", "solo")
    assert VolumeRestrictions().pre_filter(state, p, table).ok
    assert bools(VolumeRestrictions().filter(state, p, table)) == [False, False]
    assert VolumeRestrictions().failure_reasons(state, p, table, [0]) == [(REASON,)]
    assert REASON == (
        "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
        "already in-use by another pod"
    )
    assert VolumeRestrictions.resolvable_by_preemption is True


def test_the_claim_is_free_again_once_its_user_is_gone() -> None:
    user = claim_pod("user", "solo", node="a")
    table = storage_table(NODES, [claim("solo", modes=[RWOP])], [user])
    table.remove_pod("a", user.uid)
    p = claim_pod("second", "solo")
    assert VolumeRestrictions().pre_filter(fresh_state(), p, table).code is framework.Code.SKIP
    assert bools(VolumeRestrictions().filter(fresh_state(), p, table)) == [True, True]


def test_other_access_modes_and_other_namespaces_do_not_conflict() -> None:
    users = [claim_pod("u1", "shared", node="a"), claim_pod("u2", "solo", node="a",
                                                          namespace="other")]  # fmt: skip
    table = storage_table(NODES, [claim("shared"), claim("solo", modes=[RWOP])], users)
    p = claim_pod("p", "shared", "solo")
    assert VolumeRestrictions().pre_filter(fresh_state(), p, table).code is framework.Code.SKIP


def test_a_missing_claim_rejects_the_pod() -> None:
    status = VolumeRestrictions().pre_filter(fresh_state(), claim_pod("p", "gone"),
                                             storage_table(NODES))  # fmt: skip
    assert status.code is framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ('persistentvolumeclaim "gone" not found',)


def test_ephemeral_volumes_and_pods_without_volumes_are_skipped() -> None:
    table = storage_table(NODES)
    for p in (claim_pod("p"), claim_pod("q", ephemeral=["scratch"])):
        assert VolumeRestrictions().pre_filter(fresh_state(), p, table).code is framework.Code.SKIP


def test_preemption_may_evict_the_pod_using_the_claim() -> None:
    """Unschedulable, not unresolvable: as in kube-scheduler, a higher-priority pod may
    preempt the claim's user (and only on the user's node does that help)."""
    user = claim_pod("low", "solo", node="a", scheduler_name="splitsched", priority=1)
    algo = algorithm_over([host("a", cpu=4000), host("b", cpu=4000)], [user])
    c = claim("solo", modes=[RWOP], volume="pv", bound=True)
    algo.table.storage.set(c)
    algo.table.storage.set(volume("pv", modes=[RWOP], claim_ref=ClaimRef("default", "solo", c.uid)))
    result = algo.schedule(claim_pod("high", "solo", scheduler_name="splitsched", priority=10))
    assert result.preempt is not None
    assert (result.preempt.node, [v.name for v in result.preempt.victims]) == ("a", ["low"])
