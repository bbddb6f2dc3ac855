"""VolumeBinding's search, over every node at once: does each node suit the pod's claims,
and which volume would each claim take there (kube-scheduler's volumebinding
FindPodVolumes, binder.go).

`PodClaims` is what PreFilter finds (the bound claims and the unbound WaitForFirstConsumer
ones); `find` answers for all rows of the node table with numpy masks instead of one call
per node; `Found.on_row` gives one node's static bindings and claims to provision, for
Reserve. Per node, as kube:

- a bound claim's volume must exist (else "unavailable due to one or more pvc(s) bound to
  non-existent pv(s)") and its node affinity must admit the node (else "didn't match
  PersistentVolume's node affinity"); the first bound claim that fails decides;
- an unbound claim already marked with a selected node fits that node only;
- the other unbound claims, smallest request first, each take the smallest available
  volume that matches them (class, capacity, access modes, selector, volume mode) and
  whose node affinity admits the node, never one an earlier claim took there; a volume
  already bound (or assumed) to the claim is the only one it may take;
- a claim that found no volume must be provisioned: its class needs a provisioner and its
  allowedTopologies must admit the node (else "didn't find available persistent volumes
  to bind").

Volumes of equal size are taken in name order (kube lists them in no set order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from splitsched.core import storage
from splitsched.core.nodetable import BoolArray, IntArray, NodeTable
from splitsched.core.plugins import volumes

REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


@dataclass(frozen=True, slots=True)
class PodClaims:
    """The pod's claims as PreFilter sorted them (each claim once)."""

    namespace: str
    bound: tuple[storage.PersistentVolumeClaim, ...]
    delayed: tuple[storage.PersistentVolumeClaim, ...]


@dataclass(frozen=True, slots=True)
class Matched:
    """One unbound claim's candidate volumes, and per row the index of the one it takes
    there (-1: none, so it is provisioned)."""

    claim: storage.PersistentVolumeClaim
    candidates: tuple[storage.PersistentVolume, ...]
    chosen: IntArray


@dataclass(frozen=True, slots=True)
class Found:
    """`find`'s answer over a table of `n` rows."""

    n: int
    node_conflict: BoolArray
    pv_missing: BoolArray
    bind_conflict: BoolArray
    selected: tuple[storage.PersistentVolumeClaim, ...]
    matched: tuple[Matched, ...]

    @property
    def mask(self) -> BoolArray:
        fits: BoolArray = ~(self.node_conflict | self.pv_missing | self.bind_conflict)
        return fits

    def reasons(self, row: int) -> tuple[str, ...]:
        """Why the row does not fit, in kube's order."""
        flags = (
            (self.node_conflict, REASON_NODE_CONFLICT),
            (self.bind_conflict, REASON_BIND_CONFLICT),
            (self.pv_missing, REASON_PV_NOT_EXIST),
        )
        return tuple(reason for flag, reason in flags if flag[row])

    def on_row(
        self, row: int
    ) -> tuple[
        list[tuple[storage.PersistentVolumeClaim, storage.PersistentVolume]],
        list[storage.PersistentVolumeClaim],
    ]:
        """(static bindings, claims to provision) on one fitting row."""
        static = []
        provision = list(self.selected)
        for m in self.matched:
            index = int(m.chosen[row])
            if index >= 0:
                static.append((m.claim, m.candidates[index]))
            else:
                provision.append(m.claim)
        return static, provision


def find(table: NodeTable, claims: PodClaims) -> Found:
    n = table.n
    node_conflict, pv_missing = _bound(table, claims.bound)
    selected = tuple(c for c in claims.delayed if c.selected_node)
    to_match = sorted((c for c in claims.delayed if not c.selected_node),
                      key=lambda c: c.request_bytes)  # fmt: skip
    unbound_ok = np.ones(n, dtype=np.bool_)
    names = table.node_name_array()
    for claim in selected:
        unbound_ok &= (names == claim.selected_node) & _provisionable(table, claim)
    matched: list[Matched] = []
    for claim in to_match:
        m = _match(table, claim, matched)
        matched.append(m)
        unbound_ok &= (m.chosen >= 0) | _provisionable(table, claim)
    return Found(n, node_conflict, pv_missing, ~unbound_ok, selected, tuple(matched))


def _bound(
    table: NodeTable, bound: Sequence[storage.PersistentVolumeClaim]
) -> tuple[BoolArray, BoolArray]:
    """(node conflict, volume missing) per row: checkBoundClaims, where the first bound
    claim that fails a node decides its reason."""
    n = table.n
    conflict = np.zeros(n, dtype=np.bool_)
    missing = np.zeros(n, dtype=np.bool_)
    undecided = np.ones(n, dtype=np.bool_)
    for claim in bound:
        volume = table.storage.volume(claim.volume_name)
        if volume is None:
            missing |= undecided
            break
        admits = volumes.volume_node_mask(table, volume)
        conflict |= undecided & ~admits
        undecided &= admits
    return conflict, missing


def _provisionable(table: NodeTable, claim: storage.PersistentVolumeClaim) -> BoolArray:
    """Rows where the claim's class can provision a volume (checkVolumeProvisions)."""
    cls = table.storage.classes.get(claim.storage_class_name)
    if cls is None or not cls.can_provision:
        return np.zeros(table.n, dtype=np.bool_)
    return volumes.topology_mask(table, cls)


def _match(
    table: NodeTable, claim: storage.PersistentVolumeClaim, earlier: Sequence[Matched]
) -> Matched:
    """The volume the claim takes on each row (FindMatchingVolume), never one an earlier
    claim of the pod takes on that row."""
    listed = table.storage.volumes_of_class(claim.storage_class_name)
    chosen = np.full(table.n, -1, dtype=np.int64)
    prebound = next((v for v in listed if storage.prebound_for(claim, v)), None)
    if prebound is not None:
        chosen[volumes.volume_node_mask(table, prebound)] = 0
        return Matched(claim, (prebound,), chosen)
    candidates = tuple(
        sorted((v for v in listed if storage.may_take(claim, v)), key=lambda v: v.capacity_bytes)
    )
    for index, volume in enumerate(candidates):
        take = (chosen < 0) & volumes.volume_node_mask(table, volume)
        for other in earlier:
            taken = [i for i, v in enumerate(other.candidates) if v.name == volume.name]
            if taken:
                take &= other.chosen != taken[0]
        chosen[take] = index
    return Matched(claim, candidates, chosen)
