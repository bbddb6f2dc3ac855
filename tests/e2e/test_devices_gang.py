"""Gangs whose members claim devices, on the real control plane (issue 23): a gang of 4
pods x 2 GPUs is placed all or nothing.

A test driver (`tests.support.gpu_driver`) publishes a ResourceSlice per kwok node: 8 GPUs
on 2 PCIe roots, with model and memory. Every pod's claim comes from a
ResourceClaimTemplate with selectors (model, memory) and, in the first test, its GPUs on
one PCIe root (matchAttribute), made by kube-controller-manager's
resourceclaim controller. The gang's members are placed in one cycle with their devices
allocated together (`splitsched.io/group`, `splitsched.io/min-member`); a gang that does
not fit binds no member and allocates or reserves nothing, and fits whole once a node
with GPUs is added. kube-scheduler has no gangs (its alpha Workload API is off by
default), so this is splitsched's alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from splitsched.testing import kube, stack
from tests.support.gpu_driver import PCIE_ROOT, GpuDriver, claim_template, gpu_driver

pytestmark = pytest.mark.e2e

MEMBERS = 4


@pytest.fixture
def driver(kube_api: client.ApiClient) -> Iterator[GpuDriver]:
    with gpu_driver(kube_api) as made:
        yield made


@pytest.fixture
def pool(kube_api: client.ApiClient, namespace: str) -> Iterator[tuple[str, list[str]]]:
    """Two kwok nodes of their own (the pods select them by label): (label, nodes)."""
    label = f"gpus-{namespace}"
    nodes = kube.create_kwok_nodes(
        kube_api, 2, name_prefix=label, cpu="8", memory="32Gi", labels={"pool": label}
    )
    try:
        yield label, nodes
    finally:
        kube.delete_nodes(kube_api, nodes)


def member(name: str, group: str, pool: str, template: str) -> dict[str, Any]:
    pod = kube.make_pod(
        name, scheduler_name=kube.DEFAULT_SCHEDULER_NAME, cpu="100m", node_selector={"pool": pool}
    )
    pod["metadata"]["annotations"] = {
        "splitsched.io/group": group,
        "splitsched.io/min-member": str(MEMBERS),
    }
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return pod


def gang(api: client.ApiClient, namespace: str, group: str, pool: str, template: str) -> None:
    pods = [member(f"{group}-{i}", group, pool, template) for i in range(MEMBERS)]
    kube.create_pods(api, namespace=namespace, pods=pods)


def bound(api: client.ApiClient, namespace: str, group: str) -> dict[str, str]:
    """Member name -> node, for the members bound."""
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return {
        p.metadata.name: p.spec.node_name
        for p in pods
        if p.metadata.name.startswith(f"{group}-") and p.spec.node_name
    }


def claims_of(api: client.ApiClient, namespace: str, group: str) -> dict[str, Any]:
    """Member name -> the claim kube-controller-manager made for it."""
    claims = client.ResourceV1Api(api).list_namespaced_resource_claim(namespace).items
    out = {}
    for claim in claims:
        for owner in claim.metadata.owner_references or []:
            if owner.kind == "Pod" and owner.name.startswith(f"{group}-"):
                out[owner.name] = claim
    return out


def devices(claim: Any) -> list[tuple[str, str, str]]:
    allocation = claim.status.allocation if claim.status else None
    return [(r.driver, r.pool, r.device) for r in allocation.devices.results] if allocation else []


def attribute_of(driver: GpuDriver, node: str, device: str, name: str) -> str:
    slice_ = driver.resource.read_resource_slice(f"{driver.name}-{node}")
    (found,) = [d for d in slice_.spec.devices if d.name == device]
    return str(found.attributes[name].string)


def assert_placed_with_devices(
    api: client.ApiClient, namespace: str, group: str, per_pod: int
) -> list[tuple[str, str, str]]:
    """Every member's claim holds `per_pod` GPUs of the member's node and is reserved for
    it alone; returns the devices."""
    core = client.CoreV1Api(api)
    placed, claims = bound(api, namespace, group), claims_of(api, namespace, group)
    assert len(placed) == MEMBERS and set(claims) == set(placed), (placed, sorted(claims))
    taken = []
    for name, node in placed.items():
        claim, uid = claims[name], core.read_namespaced_pod(name, namespace).metadata.uid
        held = devices(claim)
        assert len(held) == per_pod and {pool for _, pool, _ in held} == {node}, held
        assert [(r.name, r.uid) for r in claim.status.reserved_for] == [(name, uid)]
        taken += held
    return taken


def test_a_gang_of_four_pods_with_two_gpus_each_is_placed_whole(
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
    driver: GpuDriver,
    pool: tuple[str, list[str]],
) -> None:
    label, nodes = pool
    driver.publish(nodes)
    model = f'device.attributes["{driver.driver}"].model == "H100"'
    memory = f'device.capacity["{driver.driver}"].memory.compareTo(quantity("40Gi")) >= 0'
    same_root = f"{driver.driver}/{PCIE_ROOT}"
    claim_template(
        kube_api, namespace, "two-gpus", driver.name, count=2, selectors=[model, memory],
        same=same_root,
    )  # fmt: skip
    gang(kube_api, namespace, "train", label, "two-gpus")
    kube.wait_for(
        lambda: len(bound(kube_api, namespace, "train")) == MEMBERS,
        timeout=60, message="the whole gang bound",
    )  # fmt: skip
    taken = assert_placed_with_devices(kube_api, namespace, "train", per_pod=2)
    assert len(set(taken)) == len(taken) == 2 * MEMBERS  # no GPU given twice
    for claim in claims_of(kube_api, namespace, "train").values():
        roots = {
            attribute_of(driver, pool, device, PCIE_ROOT) for _, pool, device in devices(claim)
        }
        assert len(roots) == 1, roots  # each member's two GPUs share a PCIe root


def test_a_gang_that_does_not_fit_binds_and_holds_nothing_until_gpus_are_added(
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
    driver: GpuDriver,
    pool: tuple[str, list[str]],
) -> None:
    """16 GPUs on two nodes, 8 of them taken by a first gang of 4 x 2. A gang of 4 x 3
    fits at most 2 members in the 8 left (3 GPUs of one node each): none binds, no claim of
    its members is allocated or reserved. A third node's 8 GPUs make room for all 4
    (whatever the first gang left where), and they bind together."""
    label, nodes = pool
    driver.publish(nodes)
    claim_template(kube_api, namespace, "two-gpus", driver.name, count=2)
    claim_template(kube_api, namespace, "three-gpus", driver.name, count=3)
    gang(kube_api, namespace, "first", label, "two-gpus")
    kube.wait_for(
        lambda: len(bound(kube_api, namespace, "first")) == MEMBERS,
        timeout=60, message="the first gang bound",
    )  # fmt: skip
    gang(kube_api, namespace, "big", label, "three-gpus")

    def all_tried() -> bool:
        """Every member has its claim and was judged unschedulable at least once."""
        core = client.CoreV1Api(kube_api)
        pods = [core.read_namespaced_pod(f"big-{i}", namespace) for i in range(MEMBERS)]
        return (
            all(
                any(
                    c.type == "PodScheduled" and c.status == "False"
                    for c in p.status.conditions or []
                )
                for p in pods
            )
            and len(claims_of(kube_api, namespace, "big")) == MEMBERS
        )

    kube.wait_for(all_tried, timeout=60, message="every member of the big gang tried")
    time.sleep(3)  # more cycles: still nothing may bind or be held
    assert bound(kube_api, namespace, "big") == {}
    held = {
        n: (devices(c), c.status.reserved_for)
        for n, c in claims_of(kube_api, namespace, "big").items()
    }
    assert all(d == [] and not r for d, r in held.values()), held
    (extra,) = kube.create_kwok_nodes(
        kube_api, 1, name_prefix=f"{label}-x", cpu="8", memory="32Gi", labels={"pool": label}
    )
    try:
        driver.publish([extra])
        kube.wait_for(
            lambda: len(bound(kube_api, namespace, "big")) == MEMBERS,
            timeout=60, message="the big gang bound once a node with GPUs came",
        )  # fmt: skip
        taken = assert_placed_with_devices(kube_api, namespace, "big", per_pod=3)
        taken += assert_placed_with_devices(kube_api, namespace, "first", per_pod=2)
        assert len(set(taken)) == len(taken) == 5 * MEMBERS  # no GPU given twice
    finally:
        kube.delete_nodes(kube_api, [extra])
