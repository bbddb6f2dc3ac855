"""Creates a run's devices (``devices.Devices``), reads and realigns its claims'
allocations, and removes it all.

State held equal: both runs create every claim unallocated before the first pod, and
each scheduler allocates them as it binds pods. kube-scheduler's run is the reference:
after each of its pods the run records every claim's allocation (``allocations``, in
the scenario's local names). splitsched's run writes that record over its own claims
after each pod (``align``): where it differs (the pod was moved, or left pending, or
splitsched chose other devices) the claim is deallocated and given kube-scheduler's
allocation, reserved for the run's bound pods that use it. Replaying beats giving each
run its own copy: a pinned copy of a pod needs its claim allocated on its node, or the
later pods would see devices free that kube-scheduler's run had in use.

Removal: claims go with their namespace once deallocated (their delete-protection
finalizer is stripped here, as the resourceclaim controller would once no pod uses
them); classes and slices are deleted by name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from bench.agreement import devices, scenario
from splitsched.testing import invariants

Manifest = dict[str, Any]
#: Claim name -> its allocation in local names (None: unallocated).
Allocations = dict[str, Any]


def create(
    api: client.ApiClient, made: devices.Devices, prefix: str, namespaces: Mapping[str, str]
) -> list[Manifest]:
    """Create classes, slices and claims; returns the cluster-scoped objects, for
    ``remove`` (claims go with their namespace)."""
    resource = client.ResourceV1Api(api)
    out: list[Manifest] = []
    for obj in made.objects:
        body = scenario.render(obj, prefix, namespaces)
        if obj["kind"] == "DeviceClass":
            resource.create_device_class(body)
        else:
            resource.create_resource_slice(body)
        out.append(body)
    for claim in made.claims:
        body = scenario.render(claim, prefix, namespaces)
        resource.create_namespaced_resource_claim(body["metadata"]["namespace"], body)
    return out


def remove(api: client.ApiClient, made: Sequence[Manifest], namespaces: Sequence[str]) -> None:
    """Deallocate the run's claims (so their namespaces can go) and delete the classes and
    slices."""
    resource = client.ResourceV1Api(api)
    for ns in namespaces:
        for claim in _claims(api, ns):
            name = claim["metadata"]["name"]
            with contextlib.suppress(ApiException):
                _deallocate(resource, ns, name)
                resource.patch_namespaced_resource_claim(
                    name, ns, {"metadata": {"finalizers": None}}
                )
    for obj in reversed(made):
        delete = (
            resource.delete_device_class
            if obj["kind"] == "DeviceClass"
            else resource.delete_resource_slice
        )
        try:
            delete(obj["metadata"]["name"])
        except ApiException as exc:
            if exc.status != 404:
                raise


def _claims(api: client.ApiClient, namespace: str) -> list[Manifest]:
    return invariants.list_json(
        api, f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    )


def localize(obj: Any, prefix: str) -> Any:
    """The inverse of ``scenario.render`` for cluster-scoped names: ``<prefix>-x`` is
    ``@x`` again."""
    if isinstance(obj, dict):
        return {k: localize(v, prefix) for k, v in obj.items()}
    if isinstance(obj, list):
        return [localize(v, prefix) for v in obj]
    if isinstance(obj, str) and obj.startswith(f"{prefix}-"):
        return "@" + obj[len(prefix) + 1 :]
    return obj


def _allocation(claim: Manifest, prefix: str) -> Any:
    """The claim's allocation in local names, without its timestamp (None: unallocated)."""
    found = (claim.get("status") or {}).get("allocation")
    if not found:
        return None
    return localize({k: v for k, v in found.items() if k != "allocationTimestamp"}, prefix)


def allocations(api: client.ApiClient, prefix: str, namespaces: Mapping[str, str]) -> Allocations:
    """Every claim of the run (namespace slot @ns0) and its allocation, local names."""
    if "@ns0" not in namespaces:
        return {}
    return {c["metadata"]["name"]: _allocation(c, prefix) for c in _claims(api, namespaces["@ns0"])}


def align(
    api: client.ApiClient, reference: Allocations, prefix: str, namespaces: Mapping[str, str]
) -> list[str]:
    """Give every claim of the run the reference's allocation where it differs (module
    docstring); returns the claims rewritten."""
    if not reference:
        return []
    ns = namespaces["@ns0"]
    resource = client.ResourceV1Api(api)
    ours = allocations(api, prefix, namespaces)
    rewritten = sorted(name for name, want in reference.items() if ours.get(name) != want)
    for name in rewritten:
        _deallocate(resource, ns, name)
        want = reference[name]
        if want is None:
            continue
        status = {
            "allocation": scenario.render(want, prefix, namespaces),
            "reservedFor": _users(api, ns, name),
        }
        resource.patch_namespaced_resource_claim(
            name, ns, {"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}}
        )
        resource.patch_namespaced_resource_claim_status(name, ns, {"status": status})
    return rewritten


def _deallocate(resource: client.ResourceV1Api, namespace: str, name: str) -> None:
    resource.patch_namespaced_resource_claim_status(
        name, namespace, {"status": {"allocation": None, "reservedFor": None, "devices": None}}
    )


def _users(api: client.ApiClient, namespace: str, claim: str) -> list[Manifest]:
    """The bound pods of the namespace that name the claim, as claim consumers."""
    return [
        {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
        for p in invariants.list_json(api, f"/api/v1/namespaces/{namespace}/pods")
        if (p.get("spec") or {}).get("nodeName")
        and any(
            c.get("resourceClaimName") == claim
            for c in (p.get("spec") or {}).get("resourceClaims") or []
        )
    ]
