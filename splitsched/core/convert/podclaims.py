"""A pod's spec.resourceClaims, resolved to the ResourceClaims they name, as kube-scheduler
resolves them (k8s.io/dynamic-resource-allocation/resourceclaim.Name):

- `resourceClaimName`: that claim, in the pod's namespace;
- `resourceClaimTemplateName`: the claim kube-controller-manager made from the template,
  recorded in status.resourceClaimStatuses under the same name; until it is recorded the
  pod waits ("ResourceClaim not created yet"), and an entry without a claim name means the
  controller decided no claim is needed, so the entry is left out. Such a claim is marked
  `from_template`: the scheduler checks the pod is its owner;
- neither: the pod waits with kube's "none of the supported fields are set".
"""

from __future__ import annotations

from typing import Any

from splitsched.core import models
from splitsched.core.convert.fields import BadField, as_list, as_object, as_str, required_str


def _statuses(status: dict[str, Any]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for i, raw in enumerate(
        as_list(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses")
    ):
        entry = as_object(raw, f"status.resourceClaimStatuses[{i}]")
        name = as_str(entry.get("name"), f"status.resourceClaimStatuses[{i}].name")
        claim = entry.get("resourceClaimName")
        out[name] = (
            None
            if claim is None
            else as_str(claim, f"status.resourceClaimStatuses[{i}].resourceClaimName")
        )
    return out


def resource_claims(
    spec: dict[str, Any], status: dict[str, Any], pod_key: str
) -> tuple[models.PodResourceClaim, ...]:
    """The pod's claims, in spec order (`pod_key` is "namespace/name", for the reasons)."""
    statuses = _statuses(status)
    out = []
    for i, raw in enumerate(as_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        path = f"spec.resourceClaims[{i}]"
        entry = as_object(raw, path)
        try:
            name = required_str(entry, "name")
        except BadField as e:
            raise BadField(f"{path}.{e.path}", e.problem) from None
        claim_name = as_str(entry.get("resourceClaimName"), f"{path}.resourceClaimName")
        template = as_str(
            entry.get("resourceClaimTemplateName"), f"{path}.resourceClaimTemplateName"
        )
        if claim_name:
            out.append(models.PodResourceClaim(name, claim_name))
        elif template:
            if name not in statuses:
                out.append(
                    models.PodResourceClaim(
                        name, waiting=f'pod "{pod_key}": ResourceClaim not created yet'
                    )
                )
            elif statuses[name] is not None:
                out.append(models.PodResourceClaim(name, statuses[name] or "", from_template=True))
        else:
            unsupported = "none of the supported fields are set"
            waiting = f'pod "{pod_key}", spec.resourceClaim "{name}": {unsupported}'
            out.append(models.PodResourceClaim(name, waiting=waiting))
    return tuple(out)
