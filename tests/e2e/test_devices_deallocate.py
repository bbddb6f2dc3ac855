"""A claim left allocated on a node that no longer takes its pod is deallocated and
allocated again where the pod fits (issue 23), by splitsched and, the same way, by
kube-scheduler v1.36 (DynamicResources' PostFilter: "deallocation of ResourceClaim
completed").

Two kwok nodes with one GPU each (`tests.support.gpu_driver`). A claim is allocated to
node A's GPU and reserved for no pod: what a binding that failed after the claim's
allocation was written leaves (kube's Unreserve keeps the allocation, as our binder's undo
does). Node A is then cordoned and a pod using the claim is created: node B is "not
available" for the allocated claim, the PostFilter deallocates it (here: the scheduler's
unschedulable report carries it, a binder writes it), and the claim's update brings the
pod back, to be bound on B with B's GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from splitsched.core.plugins.dynamic_resources import DEALLOCATED
from splitsched.testing import kube
from tests.support.gpu_driver import GpuDriver, gpu_driver

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["splitsched", "kube-scheduler"])
def scheduler_name(request: pytest.FixtureRequest) -> str:
    """Our stack, or kube-scheduler with a profile of its own (the oracle)."""
    if request.param == "splitsched":
        request.getfixturevalue("running_stack")
        return kube.DEFAULT_SCHEDULER_NAME
    return str(request.getfixturevalue("kube_scheduler"))


@pytest.fixture
def two_nodes(kube_api: client.ApiClient, namespace: str) -> Iterator[tuple[str, list[str]]]:
    label = f"dealloc-{namespace}"
    nodes = kube.create_kwok_nodes(
        kube_api, 2, name_prefix=label, cpu="8", memory="32Gi", labels={"pool": label}
    )
    try:
        yield label, nodes
    finally:
        kube.delete_nodes(kube_api, nodes)


def allocation_on(driver: GpuDriver, node: str) -> dict[str, Any]:
    result = {"request": "gpu", "driver": driver.driver, "pool": node, "device": "gpu-0"}
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [term]}}


def failed_scheduling(core: client.CoreV1Api, namespace: str, pod: str) -> list[str]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}")
    return [str(e.message) for e in events.items if e.reason == "FailedScheduling"]


def test_a_claim_allocated_on_a_node_the_pod_cannot_use_is_deallocated_and_placed_again(
    kube_api: client.ApiClient,
    namespace: str,
    scheduler_name: str,
    two_nodes: tuple[str, list[str]],
) -> None:
    label, (node_a, node_b) = two_nodes
    resource, core = client.ResourceV1Api(kube_api), client.CoreV1Api(kube_api)
    with gpu_driver(kube_api) as driver:
        driver.publish([node_a, node_b], gpus=1)
        request = {"name": "gpu", "exactly": {"deviceClassName": driver.name}}
        resource.create_namespaced_resource_claim(
            namespace, {"metadata": {"name": "gpu"}, "spec": {"devices": {"requests": [request]}}}
        )
        resource.patch_namespaced_resource_claim_status(
            "gpu", namespace, {"status": {"allocation": allocation_on(driver, node_a)}}
        )
        core.patch_node(node_a, {"spec": {"unschedulable": True}})
        pod = kube.make_pod(
            "trainer", scheduler_name=scheduler_name, cpu="100m", node_selector={"pool": label}
        )
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
        kube.create_pods(kube_api, namespace=namespace, pods=[pod])

        def bound() -> str | None:
            return core.read_namespaced_pod("trainer", namespace).spec.node_name or None

        assert kube.wait_for(bound, timeout=60, message="the pod bound") == node_b
        claim = resource.read_namespaced_resource_claim("gpu", namespace)
        (result,) = claim.status.allocation.devices.results
        assert (result.pool, result.device) == (node_b, "gpu-0")
        assert [r.name for r in claim.status.reserved_for] == ["trainer"]
        messages = kube.wait_for(
            lambda: [m for m in failed_scheduling(core, namespace, "trainer") if DEALLOCATED in m],
            timeout=30, message="the FailedScheduling event of the deallocation",
        )  # fmt: skip
        assert "1 resourceclaim not available on the node" in messages[0], messages
