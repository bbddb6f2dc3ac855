"""Dynamic Resource Allocation on the real control plane, as far as it goes today (issue
23): the watcher streams a DeviceClass, a ResourceSlice and the ResourceClaim that
kube-controller-manager's resourceclaim controller makes from a pod's
ResourceClaimTemplate, and the scheduler judges every node for the pod in
kube-scheduler's words. Until the binder writes allocations no pod with claims is bound:
the test checks that none is, and that Explain says why, node by node.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from kubernetes import client

from splitsched.core.devices import judge
from splitsched.core.plugins.dynamic_resources import NOT_YET
from splitsched.testing import kube, stack
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def gpu_class(kube_api: client.ApiClient, e2e_nodes: list[str]) -> Iterator[tuple[str, str]]:
    """A DeviceClass and one slice of 2 GPUs on the first e2e node: (class, node)."""
    resource = client.ResourceV1Api(kube_api)
    name, node = f"gpu-{uuid.uuid4().hex[:5]}", e2e_nodes[0]
    driver = f"{name}.example.com"
    resource.create_device_class(
        {
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        }
    )
    resource.create_resource_slice({"metadata": {"name": f"{name}-{node}"}, "spec": {
        "driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "A100"}}}
                    for i in range(2)]}})  # fmt: skip
    try:
        yield name, node
    finally:
        resource.delete_resource_slice(f"{name}-{node}")
        resource.delete_device_class(name)


def pod_with_template(name: str, template: str) -> dict[str, Any]:
    pod = kube.make_pod(name, scheduler_name=kube.DEFAULT_SCHEDULER_NAME, cpu="100m")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return pod


def explain(running_stack: stack.Stack, namespace: str, name: str) -> Any:
    with running_stack.channel() as channel:
        api = scheduler_pb2_grpc.SchedulerStub(channel)
        return api.Explain(
            scheduler_pb2.ExplainRequest(namespace=namespace, name=name, include_nodes=True),
            timeout=30,
        )


def node_reasons(resp: Any) -> dict[str, set[str]]:
    return {
        v.node: {
            reason for r in v.rejections if r.plugin == "DynamicResources" for reason in r.reasons
        }
        for v in resp.nodes
    }


def test_a_pod_with_a_claim_template_is_judged_node_by_node_and_not_bound(
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
    gpu_class: tuple[str, str],
    e2e_nodes: list[str],
) -> None:
    cls, gpu_node = gpu_class
    resource, core = client.ResourceV1Api(kube_api), client.CoreV1Api(kube_api)
    resource.create_namespaced_resource_claim_template(namespace, {
        "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": cls}}]}}},
    })  # fmt: skip
    kube.create_pods(kube_api, namespace=namespace, pods=[pod_with_template("trainer", "one-gpu")])

    def claim_made() -> str | None:
        pod = core.read_namespaced_pod("trainer", namespace)
        statuses = pod.status.resource_claim_statuses or []
        return next((s.resource_claim_name for s in statuses if s.resource_claim_name), None)

    claim = kube.wait_for(claim_made, timeout=30, message="the resourceclaim controller's claim")
    assert resource.read_namespaced_resource_claim(claim, namespace).status.allocation is None

    def judged() -> Any:
        try:
            resp = explain(running_stack, namespace, "trainer")
        except grpc.RpcError:
            return None
        reasons = node_reasons(resp)
        return resp if reasons.get(gpu_node) == {NOT_YET} else None

    resp = kube.wait_for(judged, timeout=30, message="the scheduler to judge the pod's claim")
    reasons = node_reasons(resp)
    others = {n: r for n, r in reasons.items() if n in e2e_nodes and n != gpu_node}
    assert others and all(r == {judge.CANNOT_ALLOCATE} for r in others.values()), others
    assert resp.feasible_nodes == 0 and resp.state == scheduler_pb2.WAITING

    def verdict() -> list[str]:  # the cycle's verdict, written: the pod was not bound
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=trainer")
        return [str(e.reason) for e in events.items if NOT_YET in str(e.message)]

    verdicts = kube.wait_for(verdict, timeout=30, message="the pod's FailedScheduling event")
    assert set(verdicts) == {"FailedScheduling"}
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=trainer")
    assert "Scheduled" not in {e.reason for e in events.items}
    assert not core.read_namespaced_pod("trainer", namespace).spec.node_name


def test_a_pod_naming_a_missing_class_waits_with_kubes_words(
    kube_api: client.ApiClient, namespace: str, running_stack: stack.Stack
) -> None:
    resource = client.ResourceV1Api(kube_api)
    request = {"name": "gpu", "exactly": {"deviceClassName": "nope"}}
    resource.create_namespaced_resource_claim(
        namespace, {"metadata": {"name": "nowhere"}, "spec": {"devices": {"requests": [request]}}}
    )
    pod = kube.make_pod("orphan", scheduler_name=kube.DEFAULT_SCHEDULER_NAME, cpu="100m")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "nowhere"}]
    kube.create_pods(kube_api, namespace=namespace, pods=[pod])

    def waiting() -> Any:
        try:
            resp = explain(running_stack, namespace, "orphan")
        except grpc.RpcError:
            return None
        return resp if "device class nope does not exist" in resp.summary else None

    resp = kube.wait_for(waiting, timeout=30, message="the pod to wait on its missing class")
    assert resp.state == scheduler_pb2.WAITING
