"""VolumeBinding: a pod's claims must be bound to volumes its node can reach, or bindable
there, as kube-scheduler's volumebinding plugin decides; the chosen volumes are assumed in
the view at Reserve and become the decision's `volume_bindings`, which the binder writes
before the Binding (kube's PreBind).

PreFilter finds every claim of the pod in the storage view, in kube's words when one is
missing (`persistentvolumeclaim "x" not found`, or for an ephemeral volume "waiting for
ephemeral volume controller to create ...") or lost, then sorts them: bound claims, and
unbound claims of a WaitForFirstConsumer class; any other unbound claim (its class binds
Immediately, is missing, or the claim names its volume itself) means the PV controller
has yet to bind it: "pod has unbound immediate PersistentVolumeClaims". All of these are
UnschedulableAndUnresolvable. Filter is `volume_matching.find` over all nodes. No Score:
kube scores only with the StorageCapacityScoring gate, off by default in v1.36.

Reserve takes, for the chosen node, each static volume (assumed bound to its claim) and
each claim to provision (assumed to carry the selected node) in the view, so no later pod
takes them; the decision carries them under `framework.PREBIND_VOLUMES`. Unreserve puts
the view back. A claim or volume the watcher could not read rejects the pod, naming it.

A decision made by another scheduler (adopted from a binder after a failover) comes with its
writes already chosen: Reserve, given them (`reserve_chosen`), assumes what of them it still
can instead of choosing, so the binder's volumes are held as this scheduler's own are, and
released by the same Unreserve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from splitsched.core import framework, models, storage
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins import volumes
from splitsched.core.plugins.volume_matching import Found, PodClaims, find
from splitsched.core.storageview import StorageView

REASON_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
_CLAIMS = "PreFilterVolumeBinding"
_FOUND = "FilterVolumeBinding"
_ASSUMED = "ReserveVolumeBinding"
_CHOSEN = "ChosenVolumeBinding"


@dataclass(frozen=True, slots=True)
class _Claims:
    """PreFilter's finding, and the table it was made against (Reserve has no table)."""

    claims: PodClaims
    table: NodeTable


@dataclass(frozen=True, slots=True)
class _Chosen:
    """Writes chosen elsewhere, for Reserve to assume in `view` (`reserve_chosen`)."""

    view: StorageView
    writes: tuple[storage.VolumeBinding, ...]


@dataclass(slots=True)
class _Assumed:
    """What Reserve assumed in which view, for Unreserve."""

    view: StorageView
    volumes: list[str] = field(default_factory=list)
    claims: list[tuple[str, str]] = field(default_factory=list)

    def undo(self) -> None:
        for name in self.volumes:
            self.view.restore_volume(name)
        for key in self.claims:
            self.view.restore_claim(key)
        self.volumes.clear()
        self.claims.clear()


class VolumeBinding:
    name: ClassVar[str] = "VolumeBinding"
    #: kube-scheduler's default VolumeBindingArgs.bindTimeoutSeconds.
    DEFAULT_BIND_TIMEOUT: ClassVar[int] = 600
    resolvable_by_preemption: ClassVar[bool] = False
    volumes_only: ClassVar[bool] = True  # skipped whole for pods without volumes
    events: ClassVar[frozenset[framework.ClusterEvent]] = volumes.VOLUME_EVENTS | {
        framework.ClusterEvent.STORAGE_CLASS_UPDATE,
        framework.ClusterEvent.CSI_NODE_ADD,
        framework.ClusterEvent.CSI_NODE_UPDATE,
    }

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        """VolumeBindingArgs: `bindTimeoutSeconds` (the deadline of a decision whose
        binder binds volumes; the scheduler service applies it) and `shape`, which
        kube-scheduler v1.36 refuses unless its StorageCapacityScoring gate is on (off by
        default; this plugin has no Score)."""
        args = args or {}
        timeout = args.get("bindTimeoutSeconds", self.DEFAULT_BIND_TIMEOUT)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0:
            raise ValueError(
                f"bindTimeoutSeconds: Invalid value: {timeout!r}: invalid BindTimeoutSeconds, "
                "should not be a negative value"
            )
        if args.get("shape") is not None:
            raise ValueError(
                "shape: unexpected field `shape`, remove it or turn on the feature gate "
                "StorageCapacityScoring (splitsched has no storage capacity scoring)"
            )
        self.bind_timeout_seconds: int = timeout

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        if not pod.volumes:
            return framework.Status.skip()
        claims = pod_claims(pod, table.storage)
        if isinstance(claims, str):
            return volumes.unresolvable(self.name, claims)
        state.write(_CLAIMS, _Claims(claims, table))
        return framework.Status.success()

    def _found(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> Found:
        """Filter's answer for this table, computed once per cycle (and afresh where Filter
        runs without this cycle's PreFilter)."""
        found = state.read(_FOUND)
        if isinstance(found, Found) and found.n == table.n:
            return found
        held = state.read(_CLAIMS)
        if isinstance(held, _Claims) and held.table is table:
            claims = held.claims
        else:
            got = pod_claims(pod, table.storage)
            claims = got if isinstance(got, PodClaims) else PodClaims(pod.namespace, (), ())
        found = find(table, claims)
        state.write(_FOUND, found)
        return found

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        return self._found(state, pod, table).mask

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        found = self._found(state, pod, table)
        return [found.reasons(row) for row in rows]

    def reserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> framework.Status:
        """Assume the node's volumes and claims to provision (AssumePodVolumes); nothing
        when every claim is bound. Writes chosen elsewhere are held instead (`_hold`)."""
        chosen = state.read(_CHOSEN)
        if isinstance(chosen, _Chosen):
            return _hold(state, pod, node, chosen)
        held = state.read(_CLAIMS) if pod.volumes else None
        if not isinstance(held, _Claims) or not held.claims.delayed:
            return framework.Status.skip()
        table = held.table
        row = table.row_of.get(node)
        found = self._found(state, pod, table)
        if row is None or not found.mask[row]:
            reasons = found.reasons(row) if row is not None else (f"node {node} is gone",)
            return framework.Status.unschedulable(*reasons, plugin=self.name, resolvable=False)
        assumed = _Assumed(table.storage)
        writes = _assume(assumed, found, row, node)
        if writes is None:
            assumed.undo()
            reason = "the volumes chosen for the pod changed while it was being scheduled"
            return framework.Status(framework.Code.ERROR, (reason,), self.name)
        state.write(_ASSUMED, assumed)
        state.write(framework.PREBIND_VOLUMES, writes)
        return framework.Status.success()

    def unreserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> None:
        assumed = state.read(_ASSUMED)
        if isinstance(assumed, _Assumed):
            assumed.undo()


def _assume(
    assumed: _Assumed, found: Found, row: int, node: str
) -> tuple[storage.VolumeBinding, ...] | None:
    """Assume the row's static bindings and provisioned claims in the view; the writes
    the binder makes, or None when the view no longer holds what they were chosen from."""
    view = assumed.view
    static, provision = found.on_row(row)
    writes: list[storage.VolumeBinding] = []
    for claim, volume in static:
        ref = volume.claim_ref
        if not (ref is not None and storage.bound_to_claim(volume, claim) and ref.uid):
            if not view.assume_volume(volume, claim):
                return None
            assumed.volumes.append(volume.name)
        writes.append(storage.VolumeBinding(claim.namespace, claim.name, volume.name))
    for claim in provision:
        if claim.selected_node != node:
            if not view.assume_claim_node(claim, node):
                return None
            assumed.claims.append(claim.key)
        writes.append(storage.VolumeBinding(claim.namespace, claim.name))
    return tuple(writes)


def reserve_chosen(
    view: StorageView, writes: Sequence[storage.VolumeBinding]
) -> framework.CycleState:
    """A cycle state in which Reserve assumes `writes` in `view` rather than choosing: for
    a decision another scheduler made (adopted from the binder carrying it out)."""
    state = framework.CycleState()
    state.write(_CHOSEN, _Chosen(view, tuple(writes)))
    return state


def _hold(
    state: framework.CycleState, pod: models.Pod, node: str, chosen: _Chosen
) -> framework.Status:
    """Assume what of the chosen writes the view still allows, for the pod's own claims
    only: a volume nobody claims, a claim no node was selected for. The rest is left as
    the watch shows it (the binder already wrote it, or will find it taken and fail the
    decision). Never rejects: the pod's room is held whatever its volumes."""
    mounted = {v.claim_name for v in volumes.claim_volumes(pod)}
    writes = tuple(
        w for w in chosen.writes if w.claim_namespace == pod.namespace and w.claim_name in mounted
    )
    assumed = _Assumed(chosen.view)
    for write in writes:
        _hold_one(assumed, write, node)
    state.write(_ASSUMED, assumed)
    state.write(framework.PREBIND_VOLUMES, writes)
    return framework.Status.success()


def _hold_one(assumed: _Assumed, write: storage.VolumeBinding, node: str) -> None:
    """Assume one chosen write if the view (assumptions included) shows it still to do."""
    view = assumed.view
    key = (write.claim_namespace, write.claim_name)
    claim = view.claims.get(key)
    if claim is None:
        return
    if write.pv_name:
        volume, seen = view.volumes.get(write.pv_name), view.volume(write.pv_name)
        if volume is None or seen is None or seen.claim_ref is not None:
            return  # gone, or claimed (by the binder already, or for another claim)
        if view.assume_volume(volume, claim):
            assumed.volumes.append(write.pv_name)
        return
    seen_claim = view.claim(*key)
    todo = seen_claim is not None and not (seen_claim.selected_node or seen_claim.volume_name)
    if todo and view.assume_claim_node(claim, node):
        assumed.claims.append(key)


def pod_claims(pod: models.Pod, view: StorageView) -> PodClaims | str:
    """The pod's claims sorted as PreFilter does, or why the pod cannot use them."""
    found: list[storage.PersistentVolumeClaim] = []
    for volume in volumes.claim_volumes(pod):
        claim = view.claim(pod.namespace, volume.claim_name)
        if claim is None:
            if volume.ephemeral:
                return volumes.ephemeral_claim_not_found(volume.claim_name)
            return volumes.claim_not_found(volume.claim_name)
        if claim.phase == storage.CLAIM_LOST:
            return (
                f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume '
                f'"{claim.volume_name}"'
            )
        if claim.invalid_reason:
            return f'persistentvolumeclaim "{claim.name}" is invalid: {claim.invalid_reason}'
        found.append(claim)
    bound: list[storage.PersistentVolumeClaim] = []
    delayed: list[storage.PersistentVolumeClaim] = []
    for claim in found:
        if claim.fully_bound:
            bound_to = view.volume(claim.volume_name)
            if bound_to is not None and bound_to.invalid_reason:
                return f'persistentvolume "{bound_to.name}" is invalid: {bound_to.invalid_reason}'
            bound.append(claim)
            continue
        cls = view.classes.get(claim.storage_class_name) if claim.storage_class_name else None
        if cls is None or not cls.waits_for_first_consumer or claim.volume_name:
            return REASON_IMMEDIATE
        delayed.append(claim)
    return PodClaims(pod.namespace, tuple(bound), tuple(delayed))
