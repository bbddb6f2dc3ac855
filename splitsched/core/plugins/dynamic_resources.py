"""DynamicResources: a pod's ResourceClaims, as kube-scheduler's dynamicresources plugin
reads, allocates and reserves them.

PreFilter finds each of the pod's claims in the view (`splitsched.core.devices`), in kube's
words when it cannot: a claim not made from its template yet, not found, being deleted, or
a request naming a DeviceClass that does not exist; the pod then waits, Unschedulable and
Unresolvable, until a claim or class event requeues it. Filter judges the nodes every
other filter passed, as kube's does (`devices.judge`): a node passes where the claims to
allocate can all be allocated and the allocated ones are usable; else "resourceclaim not
available on the node" or "cannot allocate all claims". A claims' error (a selector that
fails, a search past its budget) fails the cycle, as kube's Error does
(`framework.FilterError`). Explain shows each node's answer, and where that is "cannot
allocate all claims", which request could not be met there and why (`explain_reasons`).
Pods without claims skip the plugin.

When a profile enables DevicePacking, its PreFilter leaves a `devices.packing.Packing` in
the cycle state under `PACKING`; Filter then judges each node with it, so the allocation
kept for a node (and assumed at Reserve) is the topology-packed one. Without it, kube's
first answer, as kube. `chosen` lets a Score read what Filter kept per node.

Reserve assumes the chosen node's allocations, and the pod in each claim's reservedFor, in
the view (`DeviceView.assume`), so no other pod is given the same devices and a claim
shared by two pods is allocated once; the decision carries the writes to the binder
(`framework.PREBIND_CLAIMS`), which makes them before the Binding. Unreserve drops them.
A decision adopted after a failover holds the writes its binder reports (`hold_chosen`)
instead of choosing; one reported without them holds nothing.

kube-scheduler v1.36's default profile runs DynamicResources' PostFilter before
DefaultPreemption (freeing an idle claim beats evicting a pod); its words open the
PostFilter part of every FailedScheduling message: "no new claims to deallocate" for a pod
whose claims its PreFilter did not read (none, or rejected there), "still not
schedulable" for one whose claims it read. An allocated claim of the pod that Filter found
"not available" on a node where the pod's other claims fit, and that is reserved for no
other pod, is deallocated, as kube does ("deallocation of ResourceClaim completed"): a
failed binding leaves its claim allocated (as kube's Unreserve does), and without this the
pod would wait for that node forever. kube writes the deallocation from its PostFilter;
here the claim goes under `framework.DEALLOCATE_CLAIMS` and the pod's unschedulable report
carries it to a binder, which writes it; the claim's update then requeues the pod. Not
modelled: kube's own failure when a PreFilter rejection kept its PreFilter from running
(its PostFilter then errs "not found" and preemption never runs); here the words stay the
same whatever rejected the pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.devices import model
from splitsched.core.devices.allocator import AllocationError
from splitsched.core.devices.diagnose import why_not
from splitsched.core.devices.judge import (
    CANNOT_ALLOCATE,
    NOT_AVAILABLE,
    BareNodes,
    PodClaims,
    judge_node,
    unavailable_on,
)
from splitsched.core.devices.packing import Packing
from splitsched.core.devices.podclaims import pod_claims
from splitsched.core.devices.view import DeviceView
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins import basics

NO_CLAIMS = "no new claims to deallocate"
STILL_NOT = "still not schedulable"
DEALLOCATED = "deallocation of ResourceClaim completed"
_E = framework.ClusterEvent
_CLAIMS = "PreFilterDynamicResources"
_ANSWERS = "FilterDynamicResources"
_RESERVED = "ReserveDynamicResources"
_CHOSEN = "ChosenDynamicResources"
#: The CycleState key where DevicePacking's PreFilter leaves its `Packing`.
PACKING = "DevicePackingChooser"


@dataclass(slots=True)
class _Answers:
    """This cycle's answers, kept per row as the rows are judged: the reason each fails
    for, or the claims' error (which fails the cycle, and is then every row's answer)."""

    table: NodeTable
    claims: PodClaims | str  # a str: PreFilter's reason (the state was not written)
    in_use: frozenset[tuple[str, str, str]]
    reasons: dict[int, str] = field(default_factory=dict)
    #: per row that passes: one allocation per claim to allocate
    allocations: dict[int, tuple[model.Allocation, ...]] = field(default_factory=dict)
    error: str = ""
    packing: Packing | None = None
    bare: BareNodes = field(default_factory=BareNodes)
    #: allocated claims unusable on a node the new claims fit (by key, first found first)
    unavailable: dict[str, model.ResourceClaim] = field(default_factory=dict)


def chosen(
    state: framework.CycleState,
) -> tuple[Mapping[int, tuple[model.Allocation, ...]], frozenset[tuple[str, str, str]]]:
    """The allocations Filter kept per passing row this cycle, and the devices in use it
    judged them against (empty before Filter ran)."""
    answers = state.read(_ANSWERS)
    if not isinstance(answers, _Answers):
        return {}, frozenset()
    return answers.allocations, answers.in_use


class DynamicResources(basics.NoArgs):
    name: ClassVar[str] = "DynamicResources"
    resolvable_by_preemption: ClassVar[bool] = False
    volumes_only: ClassVar[bool] = True  # skipped whole for pods without volumes or claims
    # Node events as kube registers them (an allocated claim's node selector and network
    # slices' selectors read node labels); taints are left out, as kube leaves them out
    # when queueing hints are on (its default).
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset({
        _E.DEVICE_CLASS_ADD, _E.DEVICE_CLASS_UPDATE, _E.RESOURCE_SLICE_ADD,
        _E.RESOURCE_SLICE_UPDATE, _E.RESOURCE_CLAIM_ADD, _E.RESOURCE_CLAIM_UPDATE,
        _E.NODE_ADD, _E.NODE_LABEL, _E.NODE_ALLOCATABLE,
    })  # fmt: skip

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        if not pod.resource_claims:
            return framework.Status.skip()
        found = pod_claims(pod, table.devices)
        if isinstance(found, str):
            return framework.Status.unschedulable(found, plugin=self.name, resolvable=False)
        state.write(_CLAIMS, PodClaims.of(found))
        return framework.Status.success()

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        return self.filter_within(state, pod, table, np.ones(table.n, dtype=np.bool_))

    def filter_within(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: BoolArray
    ) -> BoolArray:
        """Judges only `rows` (the nodes every earlier filter passed), as kube runs this
        Filter last."""
        if not pod.resource_claims:
            return np.ones(table.n, dtype=np.bool_)
        answers = self._answers(state, pod, table)
        judged = np.flatnonzero(rows).tolist()
        self._judge(answers, judged)
        if answers.error:
            raise framework.FilterError(answers.error)
        fits = np.zeros(table.n, dtype=np.bool_)
        fits[[row for row in judged if not answers.reasons[row]]] = True
        return fits

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        answers = self._answers(state, pod, table)
        self._judge(answers, rows)
        if answers.error:
            return [(answers.error,)] * len(rows)
        return [(answers.reasons[row],) for row in rows]

    def explain_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        """`failure_reasons`, but where kube says only "cannot allocate all claims", which
        request could not be met on that node and why (`devices.diagnose`): Explain's
        detail. The FailedScheduling message keeps kube's words."""
        reasons = self.failure_reasons(state, pod, table, rows)
        answers = self._answers(state, pod, table)
        claims = answers.claims
        if answers.error or isinstance(claims, str):
            return reasons
        view = table.devices
        out = []
        for row, said in zip(rows, reasons, strict=True):
            if said == (CANNOT_ALLOCATE,):
                node = table.nodes[row]
                pools = view.inventory.pools_for(node)
                detail = why_not(claims.to_allocate, pools, view.classes, answers.in_use, node)
                said = (f"{CANNOT_ALLOCATE}: {detail}",)
            out.append(said)
        return out

    def reserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> framework.Status:
        """Assume the node's allocations and the pod's reservations (kube's Reserve)."""
        chosen = state.read(_CHOSEN)
        if chosen is not None:
            view, writes = chosen
            return _hold(state, pod, view, writes)
        answers = state.read(_ANSWERS)
        if not pod.resource_claims or not isinstance(answers, _Answers):
            return framework.Status.skip()
        row = answers.table.row_of.get(node)
        if row is None:
            return framework.Status.unschedulable("node is gone", plugin=self.name)
        self._judge(answers, [row])
        claims = answers.claims
        reason = (
            answers.error or answers.reasons[row] or (claims if isinstance(claims, str) else "")
        )
        if reason or isinstance(claims, str):
            return framework.Status.unschedulable(reason, plugin=self.name)
        writes = _claim_writes(pod, claims, answers.allocations[row])
        return _hold(state, pod, answers.table.devices, writes)

    def unreserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> None:
        reserved = state.read(_RESERVED)
        if reserved is not None:
            view, writes = reserved
            for write in writes:
                view.unassume((write.namespace, write.name), pod.uid)

    def _answers(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> _Answers:
        answers = state.read(_ANSWERS)
        if isinstance(answers, _Answers) and answers.table is table:
            return answers
        claims = state.read(_CLAIMS)
        if not isinstance(claims, PodClaims):  # PreFilter did not run in this state
            got = pod_claims(pod, table.devices)
            claims = got if isinstance(got, str) else PodClaims.of(got)
        packing = state.read(PACKING)
        answers = _Answers(
            table,
            claims,
            table.devices.in_use(),
            packing=packing if isinstance(packing, Packing) else None,
        )
        state.write(_ANSWERS, answers)
        return answers

    @staticmethod
    def _judge(answers: _Answers, rows: Iterable[int]) -> None:
        """Judge the rows not judged yet; the first claims' error stops it."""
        claims, table = answers.claims, answers.table
        for row in rows:
            if answers.error:
                return
            if row in answers.reasons:
                continue
            if isinstance(claims, str):
                answers.reasons[row] = claims
                continue
            try:
                reason, allocations = judge_node(
                    table.nodes[row], claims, table.devices, answers.in_use, answers.packing,
                    answers.bare,
                )  # fmt: skip
            except AllocationError as exc:
                answers.error = str(exc)
                return
            answers.reasons[row] = reason
            if not reason:
                answers.allocations[row] = allocations
            elif reason == NOT_AVAILABLE:  # kube's unavailableClaims, for PostFilter
                for claim in unavailable_on(table.nodes[row], claims):
                    answers.unavailable.setdefault(claim.key, claim)

    def post_filter(
        self,
        state: framework.CycleState,
        pod: models.Pod,
        table: NodeTable,
        candidates: Sequence[int],
        misfit: framework.Misfit,
    ) -> framework.PostFilterResult | framework.Status:
        if not isinstance(state.read(_CLAIMS), PodClaims):
            return _NOTHING_TO_DEALLOCATE
        answers = state.read(_ANSWERS)
        unavailable = answers.unavailable.values() if isinstance(answers, _Answers) else ()
        for claim in unavailable:  # in the order the nodes found them (kube: at random)
            others = [r for r in claim.reserved_for if r.uid != pod.uid]
            if not others:
                ref = model.ClaimRef(claim.namespace, claim.name, claim.uid)
                state.write(framework.DEALLOCATE_CLAIMS, (ref,))
                return _DEALLOCATED
        return _STILL_NOT_SCHEDULABLE  # kube's words once its PreFilter read the claims


def hold_chosen(
    state: framework.CycleState, view: DeviceView, writes: Sequence[model.ClaimWrite]
) -> None:
    """Make Reserve, in `state`, hold `writes` in `view` rather than choose: a decision
    another scheduler made, adopted from the binder carrying it out (its writes reported
    with its outcomes), so its devices go to no other pod while they may still be written."""
    if writes:
        state.write(_CHOSEN, (view, tuple(writes)))


def _hold(
    state: framework.CycleState,
    pod: models.Pod,
    view: DeviceView,
    writes: tuple[model.ClaimWrite, ...],
) -> framework.Status:
    consumer = model.ConsumerRef("pods", pod.name, pod.uid)
    for write in writes:
        view.assume((write.namespace, write.name), consumer, write.allocation)
    state.write(_RESERVED, (view, writes))
    state.write(framework.PREBIND_CLAIMS, writes)
    return framework.Status.success()


def _claim_writes(
    pod: models.Pod, claims: PodClaims, allocations: Sequence[model.Allocation]
) -> tuple[model.ClaimWrite, ...]:
    """The claims to allocate, with their allocations, then the allocated claims not yet
    reserved for the pod (only the reservation to write)."""
    writes = [
        model.ClaimWrite(c.namespace, c.name, c.uid, allocation)
        for c, allocation in zip(claims.to_allocate, allocations, strict=True)
    ]
    writes += [
        model.ClaimWrite(c.namespace, c.name, c.uid)
        for c in claims.allocated
        if all(r.uid != pod.uid for r in c.reserved_for)
    ]
    return tuple(writes)


_NOTHING_TO_DEALLOCATE = framework.Status.unschedulable(NO_CLAIMS, plugin=DynamicResources.name)
_STILL_NOT_SCHEDULABLE = framework.Status.unschedulable(STILL_NOT, plugin=DynamicResources.name)
_DEALLOCATED = framework.Status.unschedulable(DEALLOCATED, plugin=DynamicResources.name)
