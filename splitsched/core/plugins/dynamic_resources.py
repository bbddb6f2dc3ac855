"""DynamicResources: a pod's ResourceClaims, as kube-scheduler's dynamicresources plugin
reads them, and what it says when a pod fits nowhere.

PreFilter finds each of the pod's claims in the view (`splitsched.core.devices`), in kube's
words when it cannot: a claim not made from its template yet, not found, being deleted, or
a request naming a DeviceClass that does not exist; the pod then waits, Unschedulable and
Unresolvable, until a claim or class event requeues it. Filter judges every node as kube's
does (`devices.judge`): "resourceclaim not available on the node", "cannot allocate all
claims", a selector's error. For now no node passes, and the nodes where the claims could
be allocated say so: the binder does not yet write allocations (the step before the
Binding that kube's PreBind is), and a pod bound without its claims allocated and
reserved would never start. Explain shows each node's answer. Pods without claims skip
the plugin.

kube-scheduler v1.36's default profile runs DynamicResources' PostFilter before
DefaultPreemption (freeing an idle claim beats evicting a pod); for a pod without claims
it answers Unschedulable "no new claims to deallocate", and those words open the PostFilter
part of every FailedScheduling message. splitsched does not support DRA: it allocates no
ResourceClaims, so there is never one to deallocate, and this plugin says so in kube's
words at the same place in the profile. A profile that leaves it out loses the words, as
in kube. Not modelled: kube's own failure when a PreFilter rejection kept its PreFilter
from running (its PostFilter then errs "not found" and preemption never runs); here the
words stay the same whatever rejected the pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.devices.judge import PodClaims, judge_nodes
from splitsched.core.devices.podclaims import pod_claims
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins import basics

NO_CLAIMS = "no new claims to deallocate"
NOT_YET = (
    "the claims could be allocated here, but splitsched does not write allocations yet"
    " (schedule pods with ResourceClaims with kube-scheduler)"
)
_E = framework.ClusterEvent
_CLAIMS = "PreFilterDynamicResources"
_FOUND = "FilterDynamicResources"


@dataclass(frozen=True, slots=True)
class _Found:
    """Filter's answer for one node table: which rows pass, and why each other fails."""

    table: NodeTable
    n: int
    mask: BoolArray
    reasons: tuple[str, ...]


class DynamicResources(basics.NoArgs):
    name: ClassVar[str] = "DynamicResources"
    resolvable_by_preemption: ClassVar[bool] = False
    volumes_only: ClassVar[bool] = True  # skipped whole for pods without volumes or claims
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset({
        _E.DEVICE_CLASS_ADD, _E.DEVICE_CLASS_UPDATE, _E.RESOURCE_SLICE_ADD,
        _E.RESOURCE_SLICE_UPDATE, _E.RESOURCE_CLAIM_ADD, _E.RESOURCE_CLAIM_UPDATE,
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

    def _found(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> _Found:
        """Every node's answer, computed once per cycle and table."""
        found = state.read(_FOUND)
        if isinstance(found, _Found) and found.table is table and found.n == table.n:
            return found
        claims = state.read(_CLAIMS)
        if not isinstance(claims, PodClaims):
            got = pod_claims(pod, table.devices)
            claims = PodClaims.of(got if not isinstance(got, str) else ())
        answers = judge_nodes(claims, table.nodes[: table.n], table.devices)
        reasons = tuple(reason or NOT_YET for reason, _ in answers)
        found = _Found(table, table.n, np.zeros(table.n, dtype=np.bool_), reasons)
        state.write(_FOUND, found)
        return found

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        if not pod.resource_claims:
            return np.ones(table.n, dtype=np.bool_)
        return self._found(state, pod, table).mask

    def failure_reasons(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        found = self._found(state, pod, table)
        return [(found.reasons[row],) for row in rows]

    def post_filter(
        self,
        state: framework.CycleState,
        pod: models.Pod,
        table: NodeTable,
        candidates: Sequence[int],
        misfit: framework.Misfit,
    ) -> framework.PostFilterResult | framework.Status:
        return _NOTHING_TO_DEALLOCATE


_NOTHING_TO_DEALLOCATE = framework.Status.unschedulable(NO_CLAIMS, plugin=DynamicResources.name)
