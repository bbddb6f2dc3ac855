"""Which waiting pods a ResourceClaim's change may help: kube-scheduler's queueing hint for
claim events (DynamicResources' isSchedulableAfterClaimChange, on by default).

Every pod binding with devices writes a claim, so without a hint each write would wake
every pod waiting for devices, only to find it still does not fit. As kube:
- a claim that loses its allocation frees devices: it may help any pod;
- otherwise only a pod that uses the claim, and only when all of its claims exist, and
  the claim is new or its status changed (an added finalizer helps no one).
A claim deleted while allocated frees its devices too (kube registers no event for a
deleted claim, since its controller deallocates first; a claim deleted some other way
would leave kube's pods waiting for the unschedulable timeout): it may help any pod.
"""

from __future__ import annotations

from collections.abc import Callable

from splitsched.core import models
from splitsched.core.devices import model
from splitsched.core.devices.view import DeviceView

#: "Any waiting pod": the queue moves every pod waiting for the event.
ANY_POD = None

Hint = Callable[[models.Pod], bool] | None


def after_claim_change(
    old: model.ResourceClaim | None, new: model.ResourceClaim, view: DeviceView
) -> Hint:
    """The hint for a claim added (`old` None) or updated, with `view` already showing
    `new`: ANY_POD, or which pods to move."""
    if old is not None and old.allocation is not None and new.allocation is None:
        return ANY_POD
    if old is not None and _status(old) == _status(new):
        return _nobody

    def uses_it(pod: models.Pod) -> bool:
        return uses_claim(pod, new) and _all_claims_exist(pod, view)

    return uses_it


def deletion_frees_devices(old: model.ResourceClaim | None) -> bool:
    """Whether a claim's deletion may help any waiting pod: it held devices."""
    return old is not None and old.allocation is not None


def uses_claim(pod: models.Pod, claim: model.ResourceClaim) -> bool:
    return pod.namespace == claim.namespace and any(
        entry.claim_name == claim.name for entry in pod.resource_claims
    )


def _all_claims_exist(pod: models.Pod, view: DeviceView) -> bool:
    """kube's hint skips a pod one of whose claims is still missing: another claim event
    (its creation) will come."""
    return all(
        not entry.waiting and (pod.namespace, entry.claim_name) in view.claims
        for entry in pod.resource_claims
    )


def _status(claim: model.ResourceClaim) -> tuple[object, ...]:
    """What a waiting pod can read of a claim beyond its spec (immutable): its status, and
    whether it is being deleted or could be read."""
    return (claim.allocation, claim.reserved_for, claim.deleting, claim.invalid_reason)


def _nobody(pod: models.Pod) -> bool:
    return False
