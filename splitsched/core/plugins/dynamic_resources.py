"""DynamicResources: a pod's ResourceClaims, as kube-scheduler's dynamicresources plugin
reads them, and what it says when a pod fits nowhere.

PreFilter finds each of the pod's claims in the view (`splitsched.core.devices`), in kube's
words when it cannot: a claim not made from its template yet, not found, being deleted, or
a request naming a DeviceClass that does not exist; the pod then waits, Unschedulable and
Unresolvable, until a claim or class event requeues it. A pod whose claims are all there
also waits, for now, saying so: the binder does not yet write allocations (the step
before the Binding that kube's PreBind is), and a pod bound without its claims allocated
and reserved would never start. Pods without claims skip the plugin.

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
from typing import ClassVar

from splitsched.core import framework, models
from splitsched.core.devices.podclaims import pod_claims
from splitsched.core.nodetable import NodeTable
from splitsched.core.plugins import basics

NO_CLAIMS = "no new claims to deallocate"
NOT_YET = (
    "splitsched does not allocate devices yet: a pod with ResourceClaims waits (schedule it"
    " with kube-scheduler)"
)
_E = framework.ClusterEvent


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
        reason = found if isinstance(found, str) else NOT_YET
        return framework.Status.unschedulable(reason, plugin=self.name, resolvable=False)

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
