"""The ResourceClaims a pod uses, found in the scheduler's view, or kube-scheduler's reason
why the pod cannot be scheduled yet (its DynamicResources PreFilter, in its words)."""

from __future__ import annotations

from splitsched.core import models
from splitsched.core.devices import model
from splitsched.core.devices.view import DeviceView


def pod_claims(pod: models.Pod, view: DeviceView) -> list[model.ResourceClaim] | str:
    """The pod's claims in spec order, or why it must wait: a claim not made or not found
    yet, one being deleted, one made from a template for another pod, one unreadable, one
    another pod's decision in flight is allocating (shared with this pod once written), or
    a request naming a class that does not exist."""
    claims: list[model.ResourceClaim] = []
    for entry in pod.resource_claims:
        if entry.waiting:
            return entry.waiting
        claim = view.claim(pod.namespace, entry.claim_name)
        if claim is None:
            return f'could not find ResourceClaim "{pod.namespace}/{entry.claim_name}"'
        if claim.deleting:
            return f'resourceclaim "{claim.name}" is being deleted'
        # An unreadable claim whose owner could not be read either says it is unreadable.
        owner_known = claim.owner is not None or not claim.invalid_reason
        if entry.from_template and owner_known and not _is_for(pod, claim):
            return (
                f"ResourceClaim {claim.namespace}/{claim.name} was not created for"
                f" Pod {pod.namespace}/{pod.name} (Pod is not owner)"
            )
        if claim.invalid_reason:
            return f'resourceclaim "{claim.name}" is invalid: {claim.invalid_reason}'
        if view.allocating_for_others(claim.namespace, claim.name, pod.uid):
            being = "is in the process of being allocated"
            return f"resource claim {claim.namespace}/{claim.name} {being}"
        claims.append(claim)
    for claim in claims:
        if claim.allocation is not None:
            continue
        for request in claim.requests:
            problem = _class_problem(request, view)
            if problem:
                return problem
    return claims


def _is_for(pod: models.Pod, claim: model.ResourceClaim) -> bool:
    """kube's resourceclaim.IsForPod: the claim is in the pod's namespace and the pod is
    its controller owner (compared by UID, as metav1.IsControlledBy does)."""
    return (
        claim.namespace == pod.namespace and claim.owner is not None and claim.owner.uid == pod.uid
    )


def _class_problem(request: model.DeviceRequest, view: DeviceView) -> str:
    specs = request.alternatives()
    if not specs:
        return f"request {request.name}: unknown request type"
    for spec in specs:
        if not spec.device_class:
            return f"request {spec.name}: unsupported request type"
        if spec.device_class not in view.classes:
            return f"request {spec.name}: device class {spec.device_class} does not exist"
    return ""
