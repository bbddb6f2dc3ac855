"""Dynamic Resource Allocation on the real control plane (issue 23): the watcher streams a
DeviceClass, a ResourceSlice and the ResourceClaims kube-controller-manager's
resourceclaim controller makes from pods' ResourceClaimTemplates; the scheduler allocates
devices as kube-scheduler does, and the binder writes each claim's allocation and
reservation before the pod's Binding. No device is given twice, a shared claim is
allocated once, and a pod that fits nowhere says why, node by node.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from kubernetes import client

from splitsched.core.devices import judge
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


def bound_node(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, namespace).spec.node_name or None


def claim_of(core: client.CoreV1Api, namespace: str, pod: str) -> str | None:
    """The claim kube-controller-manager made from the pod's template (None: not yet)."""
    statuses = core.read_namespaced_pod(pod, namespace).status.resource_claim_statuses or []
    return next((s.resource_claim_name for s in statuses if s.resource_claim_name), None)


def allocated_devices(claim: Any) -> list[tuple[str, str, str]]:
    allocation = claim.status.allocation
    results = allocation.devices.results if allocation is not None else []
    return [(r.driver, r.pool, r.device) for r in results]


def test_pods_with_claim_templates_bind_with_their_devices_allocated_and_reserved(
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
    gpu_class: tuple[str, str],
    e2e_nodes: list[str],
) -> None:
    """Three pods of one GPU each for the node's two GPUs: two bind there, each claim
    allocated one GPU (never the same one) with the finalizer and the pod reserved; the
    third waits, and every other node says why in kube's words."""
    cls, gpu_node = gpu_class
    resource, core = client.ResourceV1Api(kube_api), client.CoreV1Api(kube_api)
    resource.create_namespaced_resource_claim_template(namespace, {
        "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": cls}}]}}},
    })  # fmt: skip
    names = ["trainer-0", "trainer-1", "trainer-2"]
    kube.create_pods(
        kube_api, namespace=namespace, pods=[pod_with_template(n, "one-gpu") for n in names]
    )

    def two_bound() -> list[str] | None:
        bound = [n for n in names if bound_node(core, namespace, n)]
        return bound if len(bound) == 2 else None

    bound = kube.wait_for(two_bound, timeout=60, message="two of the three pods bound")
    devices: list[tuple[str, str, str]] = []
    for name in bound:
        assert bound_node(core, namespace, name) == gpu_node
        claim = resource.read_namespaced_resource_claim(claim_of(core, namespace, name), namespace)
        assert "resource.kubernetes.io/delete-protection" in (claim.metadata.finalizers or [])
        pod_uid = core.read_namespaced_pod(name, namespace).metadata.uid
        assert [(r.resource, r.name, r.uid) for r in claim.status.reserved_for] == [
            ("pods", name, pod_uid)
        ]
        devices += allocated_devices(claim)
    assert len(devices) == 2 and len(set(devices)) == 2, devices  # no GPU given twice
    (waiting,) = set(names) - set(bound)

    claim = claim_of(core, namespace, waiting)
    # Explain names the request and why, node by node; kube's words come first.
    full = (
        f"{judge.CANNOT_ALLOCATE}: claim {namespace}/{claim}, request gpu: wants 1 device of"
        f' class {cls} (class selector device.driver == "{cls}.example.com");'
        " 2 of the node's devices pass, 0 of them free"
    )

    def judged() -> Any:
        try:
            resp = explain(running_stack, namespace, waiting)
        except grpc.RpcError:
            return None
        return resp if node_reasons(resp).get(gpu_node) == {full} else None

    resp = kube.wait_for(judged, timeout=30, message="the third pod judged on the full node")
    reasons = node_reasons(resp)
    others = {n: r for n, r in reasons.items() if n in e2e_nodes and n != gpu_node}
    no_devices = {f"{judge.CANNOT_ALLOCATE}: no ResourceSlice offers devices to this node"}
    assert others and all(r == no_devices for r in others.values()), others
    assert resp.state == scheduler_pb2.WAITING and not bound_node(core, namespace, waiting)

    # The pod's condition keeps kube-scheduler's words, as kube-scheduler writes them.
    def unschedulable_message() -> str | None:
        conditions = core.read_namespaced_pod(waiting, namespace).status.conditions or []
        said = [c.message for c in conditions if c.type == "PodScheduled" and c.status == "False"]
        return said[0] if said and said[0] else None

    message = kube.wait_for(unschedulable_message, timeout=30, message="PodScheduled=False")
    assert " cannot allocate all claims" in message and "request gpu" not in message, message


def test_a_shared_claim_is_allocated_once_and_serves_two_pods(
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
    gpu_class: tuple[str, str],
) -> None:
    cls, gpu_node = gpu_class
    resource, core = client.ResourceV1Api(kube_api), client.CoreV1Api(kube_api)
    request = {"name": "gpu", "exactly": {"deviceClassName": cls}}
    resource.create_namespaced_resource_claim(
        namespace, {"metadata": {"name": "shared"}, "spec": {"devices": {"requests": [request]}}}
    )
    pods = []
    for name in ("reader-0", "reader-1"):
        pod = kube.make_pod(name, scheduler_name=kube.DEFAULT_SCHEDULER_NAME, cpu="100m")
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
        pods.append(pod)
    kube.create_pods(kube_api, namespace=namespace, pods=pods)

    def both_bound() -> bool:
        return all(bound_node(core, namespace, p["metadata"]["name"]) for p in pods)

    kube.wait_for(both_bound, timeout=60, message="both pods of the shared claim bound")
    assert {bound_node(core, namespace, p["metadata"]["name"]) for p in pods} == {gpu_node}
    claim = resource.read_namespaced_resource_claim("shared", namespace)
    assert len(allocated_devices(claim)) == 1
    assert sorted(r.name for r in claim.status.reserved_for) == ["reader-0", "reader-1"]


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


def test_a_selector_that_fails_at_run_time_is_the_pods_reason_and_nothing_crashes(
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
    gpu_class: tuple[str, str],
) -> None:
    """The API server compiles a selector when the claim is made, so what reaches the
    scheduler can only fail when it runs: here, an attribute no GPU has. kube's Filter
    returns an Error; the pod's FailedScheduling event says it, and the scheduler goes on."""
    cls, _ = gpu_class
    resource, core = client.ResourceV1Api(kube_api), client.CoreV1Api(kube_api)
    selector = {"cel": {"expression": 'device.attributes["nowhere.example.com"].size > 1'}}
    request = {"name": "gpu", "exactly": {"deviceClassName": cls, "selectors": [selector]}}
    resource.create_namespaced_resource_claim(
        namespace, {"metadata": {"name": "broken"}, "spec": {"devices": {"requests": [request]}}}
    )
    pod = kube.make_pod("broken", scheduler_name=kube.DEFAULT_SCHEDULER_NAME, cpu="100m")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "broken"}]
    kube.create_pods(kube_api, namespace=namespace, pods=[pod])

    def reported() -> list[str]:
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=broken")
        return [str(e.message) for e in events.items if e.reason == "FailedScheduling"]

    messages = kube.wait_for(reported, timeout=30, message="the pod's FailedScheduling event")
    assert any(
        m.startswith('running "DynamicResources" filter plugin: claim ') and "no such key" in m
        for m in messages
    ), messages
    assert not bound_node(core, namespace, "broken")
    plain = kube.make_pod("plain", scheduler_name=kube.DEFAULT_SCHEDULER_NAME, cpu="100m")
    kube.create_pods(kube_api, namespace=namespace, pods=[plain])
    kube.wait_for(lambda: bound_node(core, namespace, "plain"), timeout=30, message="plain bound")


def test_an_invalid_selector_is_refused_by_the_api_server_before_it_reaches_us(
    kube_api: client.ApiClient, namespace: str, gpu_class: tuple[str, str]
) -> None:
    """The API server compiles every selector when a claim is made; one that does not
    compile never reaches the scheduler (the scheduler's own answer, for one stored by an
    older server, is tested in the unit tier: "CEL compile error")."""
    cls, _ = gpu_class
    resource = client.ResourceV1Api(kube_api)
    selector = {"cel": {"expression": 'device.attributes["gpu.example.com"].model =='}}
    request = {"name": "gpu", "exactly": {"deviceClassName": cls, "selectors": [selector]}}
    with pytest.raises(client.ApiException) as refused:
        resource.create_namespaced_resource_claim(
            namespace,
            {"metadata": {"name": "bad-cel"}, "spec": {"devices": {"requests": [request]}}},
        )
    assert refused.value.status == 422 and "compilation failed" in str(refused.value.body)


def test_a_pool_with_a_duplicate_device_name_is_invalid_on_its_node_and_harms_no_other(
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
    e2e_nodes: list[str],
) -> None:
    """Two slices of one pool both name gpu-0 (each slice alone is valid, so the API
    server takes them): kube's allocator distrusts the whole pool, and the node answers
    "invalid resource pools were encountered". A pod of another class still binds."""
    resource, core = client.ResourceV1Api(kube_api), client.CoreV1Api(kube_api)
    name, node = f"dup-{uuid.uuid4().hex[:5]}", e2e_nodes[1]
    driver = f"{name}.example.com"
    resource.create_device_class({"metadata": {"name": name}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{driver}"'}}]}})  # fmt: skip
    slices = [f"{name}-{i}" for i in range(2)]
    for slice_name in slices:
        resource.create_resource_slice({"metadata": {"name": slice_name}, "spec": {
            "driver": driver, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 2},
            "devices": [{"name": "gpu-0"}]}})  # fmt: skip
    try:
        request = {"name": "gpu", "exactly": {"deviceClassName": name}}
        resource.create_namespaced_resource_claim(
            namespace, {"metadata": {"name": "dup"}, "spec": {"devices": {"requests": [request]}}}
        )
        pod = kube.make_pod("dup", scheduler_name=kube.DEFAULT_SCHEDULER_NAME, cpu="100m")
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "dup"}]
        plain = kube.make_pod("plain-dup", scheduler_name=kube.DEFAULT_SCHEDULER_NAME, cpu="100m")
        kube.create_pods(kube_api, namespace=namespace, pods=[pod, plain])

        def judged() -> Any:
            try:
                resp = explain(running_stack, namespace, "dup")
            except grpc.RpcError:
                return None
            said = node_reasons(resp).get(node)
            return resp if said == {"invalid resource pools were encountered"} else None

        resp = kube.wait_for(judged, timeout=30, message="the duplicate pool judged invalid")
        assert resp.state == scheduler_pb2.WAITING and not bound_node(core, namespace, "dup")
        kube.wait_for(
            lambda: bound_node(core, namespace, "plain-dup"), timeout=30, message="plain bound"
        )
    finally:
        for slice_name in slices:
            resource.delete_resource_slice(slice_name)
        resource.delete_device_class(name)
