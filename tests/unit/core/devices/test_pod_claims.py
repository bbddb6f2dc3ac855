"""A pod's spec.resourceClaims resolved as kube-scheduler resolves them, and the
DynamicResources PreFilter's reasons, in kube's words, for a pod that must wait."""

from __future__ import annotations

from typing import Any

from splitsched.core import framework, models
from splitsched.core.convert import pod_from_k8s
from splitsched.core.devices import model
from splitsched.core.nodetable import NodeTable
from splitsched.core.plugins.dynamic_resources import DynamicResources


def pod_json(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": "job-0", "namespace": "ml", "uid": "u1"},
        "spec": {"containers": [{"name": "c"}], "resourceClaims": claims},
        "status": {"resourceClaimStatuses": statuses or []},
    }


def test_claims_resolve_directly_or_through_the_status_the_controller_writes() -> None:
    pod = pod_from_k8s(
        pod_json(
            [
                {"name": "shared", "resourceClaimName": "team-gpus"},
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                {"name": "skipped", "resourceClaimTemplateName": "maybe"},
            ],
            [{"name": "gpu", "resourceClaimName": "job-0-gpu-x7k2"}, {"name": "skipped"}],
        )
    )
    assert pod.resource_claims == (
        models.PodResourceClaim("shared", "team-gpus"),
        models.PodResourceClaim("gpu", "job-0-gpu-x7k2", from_template=True),
    )


def test_a_claim_not_made_yet_or_naming_nothing_waits_with_kubes_words() -> None:
    pod = pod_from_k8s(
        pod_json([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}, {"name": "odd"}])
    )
    assert pod.resource_claims == (
        models.PodResourceClaim("gpu", waiting='pod "ml/job-0": ResourceClaim not created yet'),
        models.PodResourceClaim(
            "odd",
            waiting='pod "ml/job-0", spec.resourceClaim "odd":'
            " none of the supported fields are set",
        ),
    )


def test_a_malformed_entry_makes_the_pod_invalid_not_dropped() -> None:
    pod = pod_from_k8s(pod_json([{"resourceClaimName": "x"}]), strict=False)
    assert pod.invalid_reason == "pod ml/job-0: spec.resourceClaims[0].name: required"
    assert pod.name == "job-0"


def prefilter(pod: models.Pod, table: NodeTable) -> framework.Status:
    return DynamicResources().pre_filter(framework.CycleState(), pod, table)


def claim(name: str, device_class: str = "gpu", **fields: Any) -> model.ResourceClaim:
    request = model.DeviceRequest("r", model.RequestSpec("r", device_class))
    return model.ResourceClaim("ml", name, f"uid-{name}", requests=(request,), **fields)


def test_prefilter_says_why_a_pods_claims_cannot_be_used() -> None:
    table = NodeTable()
    view = table.devices
    pod = models.Pod("u1", "ml", "job-0", resource_claims=(models.PodResourceClaim("gpu", "c1"),))
    plain = models.Pod("u2", "ml", "web")
    assert prefilter(plain, table).code == framework.Code.SKIP
    cases = [
        (None, 'could not find ResourceClaim "ml/c1"'),
        (claim("c1", deleting=True), 'resourceclaim "c1" is being deleted'),
        (
            claim("c1", invalid_reason="spec.devices: bad"),
            'resourceclaim "c1" is invalid: spec.devices: bad',
        ),
        (claim("c1"), "request r: device class gpu does not exist"),
    ]
    for obj, reason in cases:
        if obj is not None:
            view.set(obj)
        status = prefilter(pod, table)
        assert status.code == framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == (reason,)
    view.set(model.DeviceClass("gpu"))
    assert prefilter(pod, table).code == framework.Code.SUCCESS  # on to each node's answer
    waiting = models.Pod(
        "u3", "ml", "j", resource_claims=(models.PodResourceClaim("g", waiting="not yet made"),)
    )
    assert prefilter(waiting, table).reasons == ("not yet made",)


def test_the_view_counts_devices_allocations_hold_but_not_admin_ones() -> None:
    table = NodeTable()
    held = model.Allocation(
        (model.DeviceResult("r", "d", "p", "g0"), model.DeviceResult("r", "d", "p", "g1", True))
    )
    table.devices.set(claim("c1", allocation=held))
    assert table.devices.in_use() == {("d", "p", "g0")}
    table.devices.set(claim("c1"))  # deallocated
    assert table.devices.in_use() == frozenset()
    table.devices.set(claim("c2", allocation=held))
    table.devices.remove(claim("c2"))
    assert table.devices.in_use() == frozenset()


def test_a_claim_made_from_a_template_must_be_owned_by_the_pod() -> None:
    table = NodeTable()
    table.devices.set(model.DeviceClass("gpu"))
    from_template = models.PodResourceClaim("gpu", "c1", from_template=True)
    pod = models.Pod("u1", "ml", "job-0", resource_claims=(from_template,))
    not_owner = "ResourceClaim ml/c1 was not created for Pod ml/job-0 (Pod is not owner)"
    cases = [
        (None, not_owner),  # no controller owner at all
        (models.OwnerRef("Pod", "job-1", "u2", controller=True), not_owner),  # a stale status
        (models.OwnerRef("Pod", "job-0", "u1", controller=True), ""),
    ]
    for owner, reason in cases:
        table.devices.set(claim("c1", owner=owner))
        status = prefilter(pod, table)
        assert status.reasons == ((reason,) if reason else ())
        assert (status.code == framework.Code.SUCCESS) == (not reason)
    named = models.Pod("u1", "ml", "job-0", resource_claims=(models.PodResourceClaim("g", "c1"),))
    table.devices.set(claim("c1", owner=models.OwnerRef("Pod", "job-1", "u2", controller=True)))
    assert prefilter(named, table).code == framework.Code.SUCCESS  # named: any owner will do


def test_an_unreadable_claim_whose_owner_is_unknown_says_it_is_unreadable() -> None:
    table = NodeTable()
    from_template = models.PodResourceClaim("gpu", "c1", from_template=True)
    pod = models.Pod("u1", "ml", "job-0", resource_claims=(from_template,))
    table.devices.set(claim("c1", invalid_reason="metadata.ownerReferences[0]: bad"))
    assert prefilter(pod, table).reasons == (
        'resourceclaim "c1" is invalid: metadata.ownerReferences[0]: bad',
    )
