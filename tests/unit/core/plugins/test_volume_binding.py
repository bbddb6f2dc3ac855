"""VolumeBinding: kube-scheduler's volumebinding cases (volume_binding_test.go,
binder_test.go) against the storage view, and Reserve/Unreserve assuming volumes so two
pods never take one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest

from splitsched.core import framework, models, storage
from splitsched.core.nodetable import NodeTable
from splitsched.core.plugins.volume_binding import REASON_IMMEDIATE, VolumeBinding, reserve_chosen
from splitsched.core.plugins.volume_matching import (
    REASON_BIND_CONFLICT,
    REASON_NODE_CONFLICT,
    REASON_PV_NOT_EXIST,
)
from tests.support.builders import GI, HOSTNAME, ZONE, bools, fresh_state
from tests.support.storage import (
    bound_pair,
    claim,
    claim_pod,
    host,
    node_term,
    storage_class,
    storage_table,
    volume,
)

WAIT = storage_class("wait")
IMMEDIATE = storage_class("immediate", wffc=False)
PROVISIONED = storage_class("provisioned", provisioner="csi.example.com")
NODES = [host("node-a", zone="z1"), host("node-b", zone="z2"), host("node-c", zone="z2")]


def run(
    p: models.Pod, objects: Iterable[storage.StorageObject], nodes: Sequence[models.Node] = NODES
) -> tuple[framework.Status, list[tuple[str, ...]], NodeTable, framework.CycleState]:
    """PreFilter, then Filter's reasons per node (() where it fits)."""
    table = storage_table(nodes, [WAIT, IMMEDIATE, PROVISIONED, *objects])
    state = fresh_state()
    plugin = VolumeBinding()
    status = plugin.pre_filter(state, p, table)
    if not status.ok or status.code is framework.Code.SKIP:
        return status, [], table, state
    fits = plugin.filter(state, p, table)
    rows = [row for row in range(table.n) if not fits[row]]
    reasons = dict(zip(rows, plugin.failure_reasons(state, p, table, rows), strict=True))
    return status, [reasons.get(row, ()) for row in range(table.n)], table, state


def rejected(status: framework.Status) -> str:
    assert status.code is framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.plugin == "VolumeBinding"
    return "; ".join(status.reasons)


# ---- PreFilter ---------------------------------------------------------------------------


def test_a_pod_without_claims_is_skipped() -> None:
    status, _, _, _ = run(claim_pod("pod-a"), [])
    assert status.code is framework.Code.SKIP


def test_all_bound_fits_everywhere() -> None:
    status, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), bound_pair("pvc-a", "pv-a"))
    assert status.ok and reasons == [(), (), ()]


@pytest.mark.parametrize(
    ("claims", "ephemeral", "message"),
    [
        (["pvc-a"], [], 'persistentvolumeclaim "pvc-a" not found'),
        (["bound", "pvc-b"], [], 'persistentvolumeclaim "pvc-b" not found'),
        ([], ["scratch"], 'waiting for ephemeral volume controller to create the '
                          'persistentvolumeclaim "pod-a-scratch"'),
    ],
    ids=["missing", "part missing", "ephemeral not created yet"],
)  # fmt: skip
def test_a_missing_claim_rejects_the_pod(
    claims: list[str], ephemeral: list[str], message: str
) -> None:
    status, _, _, _ = run(
        claim_pod("pod-a", *claims, ephemeral=ephemeral), bound_pair("bound", "pv-bound")
    )
    assert rejected(status) == message


def test_a_missing_claim_is_reported_before_an_unbound_immediate_one() -> None:
    """kube checks every claim exists before sorting them."""
    status, _, _, _ = run(claim_pod("pod-a", "imm", "gone"), [claim("imm", cls="immediate")])
    assert rejected(status) == 'persistentvolumeclaim "gone" not found'


@pytest.mark.parametrize(
    "unbound",
    [
        claim("pvc-a", cls="immediate"),
        claim("pvc-a", cls="no-such-class"),
        claim("pvc-a"),  # no class: static volumes only, bound by the PV controller
        claim("pvc-a", cls="wait", volume="pv-a"),  # names its volume: prebound
    ],
    ids=["immediate class", "missing class", "no class", "prebound"],
)
def test_unbound_immediate_claims_make_the_pod_wait(
    unbound: storage.PersistentVolumeClaim,
) -> None:
    status, _, _, _ = run(claim_pod("pod-a", "pvc-a"), [unbound])
    assert (
        rejected(status) == REASON_IMMEDIATE == "pod has unbound immediate PersistentVolumeClaims"
    )


def test_a_lost_claim_rejects_the_pod() -> None:
    lost = claim("pvc-a", cls="wait", volume="pv-a", phase=storage.CLAIM_LOST)
    status, _, _, _ = run(claim_pod("pod-a", "pvc-a"), [lost])
    assert rejected(status) == (
        'persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"'
    )


def test_claims_and_volumes_the_watcher_could_not_read_are_named() -> None:
    bad = claim("pvc-a", cls="wait", invalid_reason="spec.resources.requests.storage: bad")
    status, _, _, _ = run(claim_pod("pod-a", "pvc-a"), [bad])
    assert rejected(status) == (
        'persistentvolumeclaim "pvc-a" is invalid: spec.resources.requests.storage: bad'
    )
    c, v = bound_pair("pvc-b", "pv-b", invalid_reason="spec.nodeAffinity: unsupported")
    status, _, _, _ = run(claim_pod("pod-b", "pvc-b"), [c, v])
    assert rejected(status) == 'persistentvolume "pv-b" is invalid: spec.nodeAffinity: unsupported'


# ---- Filter ------------------------------------------------------------------------------


def test_unbound_claim_without_volumes_finds_none() -> None:
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), [claim("pvc-a", cls="wait")])
    assert reasons == [(REASON_BIND_CONFLICT,)] * 3
    assert REASON_BIND_CONFLICT == "node(s) didn't find available persistent volumes to bind"


def test_bound_and_unbound_unsatisfied_gives_both_reasons() -> None:
    c, v = bound_pair("pvc-a", "pv-a", cls="wait", node="node-x")
    status, reasons, _, _ = run(
        claim_pod("pod-a", "pvc-a", "pvc-b"), [c, v, claim("pvc-b", cls="wait")]
    )
    assert status.ok
    assert reasons == [(REASON_NODE_CONFLICT, REASON_BIND_CONFLICT)] * 3


def test_bound_volume_node_affinity_limits_the_nodes() -> None:
    c, v = bound_pair("pvc-a", "pv-a", zone="z2")
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), [c, v])
    assert reasons == [(REASON_NODE_CONFLICT,), (), ()]
    assert REASON_NODE_CONFLICT == "node(s) didn't match PersistentVolume's node affinity"


def test_bound_volume_not_found() -> None:
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), [claim("pvc-a", volume="pv-a", bound=True)])
    assert reasons == [(REASON_PV_NOT_EXIST,)] * 3


def test_the_first_failing_bound_claim_decides_a_node() -> None:
    """checkBoundClaims stops at the first claim that fails a node."""
    c1, v1 = bound_pair("pvc-1", "pv-1", zone="z1")
    c2 = claim("pvc-2", volume="pv-gone", bound=True)
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-1", "pvc-2"), [c1, v1, c2])
    assert reasons == [(REASON_PV_NOT_EXIST,), (REASON_NODE_CONFLICT,), (REASON_NODE_CONFLICT,)]


def test_local_volumes_bind_where_they_are() -> None:
    objects: list[storage.StorageObject] = [
        claim("pvc-a", cls="wait"),
        volume("pv-b", cls="wait", node="node-b"),
    ]
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), objects)
    assert reasons == [(REASON_BIND_CONFLICT,), (), (REASON_BIND_CONFLICT,)]


@pytest.mark.parametrize(
    ("pv", "fits"),
    [
        (volume("pv", cls="other"), False),
        (volume("pv", cls="wait", size=GI // 2), False),
        (volume("pv", cls="wait", modes=("ReadOnlyMany",)), False),
        (volume("pv", cls="wait", volume_mode="Block"), False),
        (volume("pv", cls="wait", phase="Released"), False),
        (volume("pv", cls="wait", claim_ref=storage.ClaimRef("default", "other")), False),
        (volume("pv", cls="wait", labels={"tier": "cold"}), False),
        (volume("pv", cls="wait", invalid_reason="bad capacity"), False),
        (volume("pv", cls="wait", labels={"tier": "hot"}, size=2 * GI), True),
    ],
    ids=["class", "too small", "access modes", "volume mode", "not available", "claimed",
         "selector", "invalid", "matches"],
)  # fmt: skip
def test_what_a_volume_must_offer_a_claim(pv: storage.PersistentVolume, fits: bool) -> None:
    hot = models.LabelSelector(match_labels=(("tier", "hot"),))
    objects: list[storage.StorageObject] = [claim("pvc-a", cls="wait", selector=hot), pv]
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), objects)
    assert reasons == ([()] * 3 if fits else [(REASON_BIND_CONFLICT,)] * 3)


def test_a_prebound_volume_is_the_only_one_a_claim_takes() -> None:
    """FindMatchingVolume returns a volume bound to the claim wherever its node affinity
    allows, and nothing elsewhere, whatever else is available."""
    c = claim("pvc-a", cls="wait")
    ref = storage.ClaimRef("default", "pvc-a", c.uid)
    objects: list[storage.StorageObject] = [
        c,
        volume("pv-mine", cls="wait", node="node-b", claim_ref=ref, phase="Bound"),
        volume("pv-free", cls="wait"),
    ]
    _, reasons, _, _state = run(claim_pod("pod-a", "pvc-a"), objects)
    assert reasons == [(REASON_BIND_CONFLICT,), (), (REASON_BIND_CONFLICT,)]


def test_the_smallest_fitting_volume_is_chosen_and_claims_do_not_share() -> None:
    """Claims are matched smallest request first, each to the smallest volume that fits
    it ("local volumes with close capacity are preferred (multiple pvcs)")."""
    objects: list[storage.StorageObject] = [
        claim("big", cls="wait", size=3 * GI),
        claim("small", cls="wait", size=GI),
        volume("pv-4g", cls="wait", size=4 * GI, node="node-a"),
        volume("pv-2g", cls="wait", size=2 * GI, node="node-a"),
        volume("pv-1g", cls="wait", size=GI, node="node-a"),
        volume("pv-3g", cls="wait", size=3 * GI, node="node-b"),
    ]
    p = claim_pod("pod-a", "big", "small")
    _status, reasons, _table, state = run(p, objects)
    assert reasons == [(), (REASON_BIND_CONFLICT,), (REASON_BIND_CONFLICT,)]
    assert VolumeBinding().reserve(state, p, "node-a").ok
    assert state.read(framework.PREBIND_VOLUMES) == (
        storage.VolumeBinding("default", "small", "pv-1g"),
        storage.VolumeBinding("default", "big", "pv-4g"),
    )


def test_two_claims_cannot_take_the_one_volume_of_a_node() -> None:
    objects: list[storage.StorageObject] = [
        claim("c1", cls="wait"),
        claim("c2", cls="wait"),
        volume("pv-a", cls="wait", node="node-a"),
        volume("pv-b1", cls="wait", node="node-b"),
        volume("pv-b2", cls="wait", node="node-b"),
    ]
    _, reasons, _, _ = run(claim_pod("pod-a", "c1", "c2"), objects)
    assert reasons == [(REASON_BIND_CONFLICT,), (), (REASON_BIND_CONFLICT,)]


def test_dynamic_provisioning_where_the_class_allows() -> None:
    zonal = storage_class("zonal", provisioner="csi.example.com", topologies=[{ZONE: ["z2"]}])
    objects: list[storage.StorageObject] = [
        zonal,
        claim("pvc-a", cls="zonal"),
        claim("pvc-b", cls="provisioned"),
    ]
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a", "pvc-b"), objects)
    assert reasons == [(REASON_BIND_CONFLICT,), (), ()]


@pytest.mark.parametrize(
    ("topologies", "fits"),
    [
        ([], [True, True, True]),
        ([{ZONE: ["z1"]}, {HOSTNAME: ["node-c"]}], [True, False, True]),
        ([{ZONE: ["z2"], HOSTNAME: ["node-b"]}], [False, True, False]),
        ([{ZONE: []}], [False, False, False]),  # a requirement without values: invalid
        ([{}], [False, False, False]),  # an empty term selects nothing
    ],
)
def test_allowed_topologies(topologies: list[dict[str, list[str]]], fits: list[bool]) -> None:
    cls = storage_class("zonal", provisioner="csi.example.com", topologies=topologies)
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), [cls, claim("pvc-a", cls="zonal")])
    assert [r == () for r in reasons] == fits


def test_a_no_provisioner_class_only_binds_static_volumes() -> None:
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), [claim("pvc-a", cls="wait")])
    assert reasons == [(REASON_BIND_CONFLICT,)] * 3


def test_a_claim_with_a_selected_node_fits_that_node_only() -> None:
    objects: list[storage.StorageObject] = [
        claim("pvc-a", cls="provisioned", selected_node="node-c")
    ]
    _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), objects)
    assert reasons == [(REASON_BIND_CONFLICT,), (REASON_BIND_CONFLICT,), ()]


def test_volume_node_affinity_terms_are_ored_and_invalid_ones_match_nothing() -> None:
    ored = (node_term(HOSTNAME, "node-a"), node_term(ZONE, "z2"))
    no_values = (models.NodeSelectorTerm((models.NodeSelectorRequirement(ZONE, "In", ()),)),)
    empty_term = (models.NodeSelectorTerm(),)
    fields_only = (
        models.NodeSelectorTerm((), (models.NodeSelectorRequirement("metadata.name", "In",
                                                                    ("node-x",)),)),
    )  # fmt: skip
    for affinity, fits in [
        (ored, [True, True, True]),
        (no_values, [False, False, False]),
        (empty_term, [False, False, False]),
        ((), [False, False, False]),
        # checked against the node's labels alone (volume.CheckNodeAffinity): fields pass
        (fields_only, [True, True, True]),
    ]:
        c, v = bound_pair("pvc-a", "pv-a", node_affinity=affinity)
        _, reasons, _, _ = run(claim_pod("pod-a", "pvc-a"), [c, v])
        assert [r == () for r in reasons] == fits, affinity


# ---- Reserve and Unreserve ---------------------------------------------------------------


def test_reserve_assumes_the_volume_so_the_next_pod_finds_it_taken() -> None:
    objects: list[storage.StorageObject] = [
        claim("c1", cls="wait"),
        claim("c2", cls="wait"),
        volume("pv-a", cls="wait", node="node-a"),
    ]
    first = claim_pod("first", "c1")
    _, reasons, table, state = run(first, objects)
    assert reasons == [(), (REASON_BIND_CONFLICT,), (REASON_BIND_CONFLICT,)]
    plugin = VolumeBinding()
    assert plugin.reserve(state, first, "node-a").ok
    assert state.read(framework.PREBIND_VOLUMES) == (
        storage.VolumeBinding("default", "c1", "pv-a"),
    )
    assumed = table.storage.volume("pv-a")
    assert assumed is not None and assumed.claim_ref == storage.ClaimRef(
        "default", "c1", "uid-claim-default-c1"
    )

    second = claim_pod("second", "c2")
    state2 = fresh_state()
    assert plugin.pre_filter(state2, second, table).ok
    assert bools(plugin.filter(state2, second, table)) == [False, False, False]

    plugin.unreserve(state, first, "node-a")
    assert table.storage.volume("pv-a") == table.storage.volumes["pv-a"]
    state3 = fresh_state()
    assert plugin.pre_filter(state3, second, table).ok
    assert bools(plugin.filter(state3, second, table)) == [True, False, False]


def test_a_pod_sharing_the_claim_follows_the_assumed_volume() -> None:
    objects: list[storage.StorageObject] = [
        claim("shared", cls="wait"),
        volume("pv-a", cls="wait", node="node-a"),
        volume("pv-b", cls="wait", node="node-b"),
    ]
    first = claim_pod("first", "shared")
    _, _, table, state = run(first, objects)
    plugin = VolumeBinding()
    assert plugin.reserve(state, first, "node-b").ok
    second = claim_pod("second", "shared")
    state2 = fresh_state()
    assert plugin.pre_filter(state2, second, table).ok
    assert bools(plugin.filter(state2, second, table)) == [False, True, False]
    assert plugin.reserve(state2, second, "node-b").ok
    assert state2.read(framework.PREBIND_VOLUMES) == (
        storage.VolumeBinding("default", "shared", "pv-b"),
    )


def test_reserve_marks_a_claim_to_provision_with_the_node() -> None:
    p = claim_pod("pod-a", "pvc-a")
    _, _, table, state = run(p, [claim("pvc-a", cls="provisioned")])
    assert VolumeBinding().reserve(state, p, "node-b").ok
    assert state.read(framework.PREBIND_VOLUMES) == (storage.VolumeBinding("default", "pvc-a", ""),)
    assumed = table.storage.claim("default", "pvc-a")
    assert assumed is not None and assumed.selected_node == "node-b"
    # Another pod of the claim now fits that node only.
    other = claim_pod("other", "pvc-a")
    state2 = fresh_state()
    assert VolumeBinding().pre_filter(state2, other, table).ok
    assert bools(VolumeBinding().filter(state2, other, table)) == [False, True, False]
    VolumeBinding().unreserve(state, p, "node-b")
    assert table.storage.claim("default", "pvc-a") == table.storage.claims[("default", "pvc-a")]


def test_reserve_is_skipped_when_every_claim_is_bound() -> None:
    p = claim_pod("pod-a", "pvc-a")
    _, _, _, state = run(p, bound_pair("pvc-a", "pv-a"))
    assert VolumeBinding().reserve(state, p, "node-a").code is framework.Code.SKIP
    assert state.read(framework.PREBIND_VOLUMES) is None
    assert VolumeBinding().reserve(fresh_state(), claim_pod("none"), "node-a").code is (
        framework.Code.SKIP
    )


def test_reserve_refuses_a_node_the_volumes_do_not_fit() -> None:
    """Reserve on a node Filter rejected (a preemption's nominated node) says why."""
    p = claim_pod("pod-a", "pvc-a")
    _, _, _, state = run(p, [claim("pvc-a", cls="wait"), volume("pv", cls="wait", node="node-a")])
    status = VolumeBinding().reserve(state, p, "node-b")
    assert not status.ok and status.reasons == (REASON_BIND_CONFLICT,)


def test_a_newer_version_from_the_watch_replaces_the_assumption() -> None:
    """The passive assume cache: the binder's write (or anyone's) supersedes it."""
    objects: list[storage.StorageObject] = [
        claim("c1", cls="wait"),
        volume("pv-a", cls="wait", node="node-a"),
    ]
    p = claim_pod("pod-a", "c1")
    _, _, table, state = run(p, objects)
    assert VolumeBinding().reserve(state, p, "node-a").ok
    assert table.storage.is_assumed("pv-a")
    table.storage.set(volume("pv-a", cls="wait", node="node-a", rv="1"))  # the same version
    assert table.storage.is_assumed("pv-a")
    newer = volume(
        "pv-a",
        cls="wait",
        node="node-a",
        rv="2",
        claim_ref=storage.ClaimRef("default", "c1", "uid-claim-default-c1"),
    )
    table.storage.set(newer)
    assert not table.storage.is_assumed("pv-a") and table.storage.volume("pv-a") == newer
    VolumeBinding().unreserve(state, p, "node-a")  # nothing left to restore: harmless
    assert table.storage.volume("pv-a") == newer


# ---- Reserve of writes chosen elsewhere (a decision adopted from a binder) -----------------


def test_reserve_holds_the_writes_chosen_elsewhere_and_unreserve_releases_them() -> None:
    """A decision adopted after a failover: Reserve assumes what its binder reports rather
    than choosing, for the pod's own claims only, and skips what is already written or
    taken; the writes it was given are the decision's, and Unreserve gives back what it
    assumed."""
    objects: list[storage.StorageObject] = [
        claim("static", cls="wait"),
        claim("dynamic", cls="provisioned"),
        claim("written", cls="wait"),
        claim("not-mounted", cls="wait"),
        volume("pv-a", cls="wait", node="node-a"),
        volume("pv-other", cls="wait", node="node-a"),
        volume("pv-written", cls="wait", node="node-a",
               claim_ref=storage.ClaimRef("default", "written", "uid-claim-default-written")),
    ]  # fmt: skip
    table = storage_table(NODES, [WAIT, PROVISIONED, *objects])
    view = table.storage
    p = claim_pod("pod-a", "static", "dynamic", "written")
    writes = (
        storage.VolumeBinding("default", "static", "pv-a"),
        storage.VolumeBinding("default", "dynamic"),
        storage.VolumeBinding("default", "written", "pv-written"),
        storage.VolumeBinding("default", "not-mounted", "pv-other"),
        storage.VolumeBinding("elsewhere", "static", "pv-other"),
    )
    state = reserve_chosen(view, writes)
    plugin = VolumeBinding()
    assert plugin.reserve(state, p, "node-a").ok
    assert state.read(framework.PREBIND_VOLUMES) == writes[:3]
    held = view.volume("pv-a")
    assert held is not None and held.claim_ref is not None and held.claim_ref.name == "static"
    dynamic = view.claim("default", "dynamic")
    assert dynamic is not None and dynamic.selected_node == "node-a"
    assert view.assumptions() == 2  # not pv-written (claimed already), not pv-other
    # pv-a is taken for any other pod now (free, it would win the tie with pv-other).
    rival = claim_pod("rival", "not-mounted")
    rival_state = fresh_state()
    assert plugin.pre_filter(rival_state, rival, table).ok
    assert bools(plugin.filter(rival_state, rival, table)) == [True, False, False]
    assert plugin.reserve(rival_state, rival, "node-a").ok
    assert rival_state.read(framework.PREBIND_VOLUMES) == (
        storage.VolumeBinding("default", "not-mounted", "pv-other"),
    )
    plugin.unreserve(rival_state, rival, "node-a")
    plugin.unreserve(state, p, "node-a")
    assert view.assumptions() == 0


def test_reserve_of_chosen_writes_leaves_a_volume_another_decision_holds() -> None:
    """The new leader already gave the volume to one of its own pods: the adopted decision
    holds its room but not the volume (one of the two bindings will fail, never both
    succeed), and never undoes the other decision's assumption."""
    objects: list[storage.StorageObject] = [
        claim("mine", cls="wait"), claim("theirs", cls="wait"),
        volume("pv-a", cls="wait", node="node-a"),
    ]  # fmt: skip
    own = claim_pod("own", "mine")
    _, _, table, own_state = run(own, objects)
    plugin = VolumeBinding()
    assert plugin.reserve(own_state, own, "node-a").ok
    adopted = claim_pod("adopted", "theirs")
    state = reserve_chosen(table.storage, [storage.VolumeBinding("default", "theirs", "pv-a")])
    assert plugin.reserve(state, adopted, "node-a").ok
    plugin.unreserve(state, adopted, "node-a")
    held = table.storage.volume("pv-a")
    assert held is not None and held.claim_ref is not None and held.claim_ref.name == "mine"
