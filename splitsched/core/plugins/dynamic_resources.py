"""DynamicResources, PostFilter only: what kube-scheduler's dynamicresources plugin says
when a pod fits nowhere and it has no ResourceClaim to deallocate.

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
from splitsched.core.nodetable import NodeTable
from splitsched.core.plugins import basics

NO_CLAIMS = "no new claims to deallocate"


class DynamicResources(basics.NoArgs):
    name: ClassVar[str] = "DynamicResources"

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
