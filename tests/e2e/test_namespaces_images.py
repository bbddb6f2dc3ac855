"""Issue 18 item 5 on the real control plane: namespaceSelector and ImageLocality.

* A required anti-affinity whose namespaceSelector picks namespaces by label keeps the pods
  of those namespaces apart (one per node), ignores pods of other namespaces, and a pod
  that cannot fit waits with kube-scheduler's message. kube-scheduler runs the same
  scenario (its own namespaces, label values and schedulerName) and must agree: the same
  pods bind, the same pod waits, with the same reasons.
* A namespace label change re-evaluates the waiting pod at once. Here we differ on purpose:
  kube-scheduler registers no Namespace event for InterPodAffinity, so its pod waits for
  another pod or node event, or the 5-minute flush of unschedulable pods.
* A node that reports the pod's image (status.images) wins between two equal nodes, for
  both schedulers.

Every check reads the API server's objects, never our logs.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from splitsched.testing import kube, stack

pytestmark = pytest.mark.e2e

SSD = {"disktype": "ssd"}  # two of the module's nodes, one per zone
HOSTNAME = "kubernetes.io/hostname"
MB = 1024 * 1024


def anti_affinity(team: str) -> dict[str, Any]:
    """Keep away from app=db pods of every namespace labelled team=<team>, per node."""
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "namespaceSelector": {"matchLabels": {"team": team}},
        "topologyKey": HOSTNAME,
    }
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def db_pod(name: str, scheduler: str, team: str | None) -> dict[str, Any]:
    return kube.make_pod(
        name,
        scheduler_name=scheduler,
        labels={"app": "db"},
        node_selector=SSD,
        affinity=anti_affinity(team) if team else None,
    )


def node_of(api: client.ApiClient, namespace: str, name: str) -> str:
    return str(kube.get_pod(api, namespace=namespace, name=name).spec.node_name or "")


def wait_node(api: client.ApiClient, namespace: str, name: str, timeout: float = 60) -> str:
    return kube.wait_for(
        lambda: node_of(api, namespace, name) or None,
        timeout=timeout,
        interval=0.5,
        message=f"{namespace}/{name} bound",
    )


def failed_scheduling(api: client.ApiClient, namespace: str, name: str) -> str:
    """A FailedScheduling Event message of the pod ("" while there is none)."""
    events = client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},reason=FailedScheduling"
    )
    return str(events.items[-1].message) if events.items else ""


def wait_failed(api: client.ApiClient, namespace: str, name: str, timeout: float = 60) -> str:
    return kube.wait_for(
        lambda: failed_scheduling(api, namespace, name) or None,
        timeout=timeout,
        interval=0.5,
        message=f"FailedScheduling for {namespace}/{name}",
    )


def run_scenario(api: client.ApiClient, scheduler: str) -> dict[str, Any]:
    """Two namespaces labelled team=<t>, one labelled otherwise; db pods on the two ssd
    nodes. Returns where each pod went, the waiting pod's message, and the namespaces."""
    team = f"t{uuid.uuid4().hex[:6]}"
    a1 = kube.create_namespace(api, prefix="ns-a1", labels={"team": team})
    a2 = kube.create_namespace(api, prefix="ns-a2", labels={"team": team})
    b = kube.create_namespace(api, prefix="ns-b", labels={"team": f"{team}-other"})
    kube.create_pods(api, namespace=a1, pods=[db_pod("p1", scheduler, team)])
    first = wait_node(api, a1, "p1")
    kube.create_pods(api, namespace=a2, pods=[db_pod("p2", scheduler, team)])
    second = wait_node(api, a2, "p2")
    # p4 carries no term, and p1's and p2's terms do not select its namespace: it may
    # share a node with them.
    kube.create_pods(api, namespace=b, pods=[db_pod("p4", scheduler, None)])
    wait_node(api, b, "p4")
    # p3's own term selects p1 and p2, in the other namespaces: no ssd node is left.
    kube.create_pods(api, namespace=b, pods=[db_pod("p3", scheduler, team)])
    message = wait_failed(api, b, "p3")
    assert node_of(api, b, "p3") == ""
    return {
        "first": first,
        "second": second,
        "waiting": message,
        "namespaces": (a1, a2, b),
        "team": team,
    }


def reasons(message: str) -> dict[str, int]:
    """Reason -> node count of a FitError message ("0/N nodes are available: 2 r1, 14
    r2."), the total under "nodes", without the PostFilter plugins' words that follow ("no
    new claims to deallocate, preemption: ..."; bench.agreement compares those)."""
    head, _, rest = message.partition(" nodes are available: ")
    counts = {"nodes": int(head.split("/")[1])}
    for part in rest.split(". ")[0].rstrip(".").split(", "):
        count, _, reason = part.partition(" ")
        counts[reason] = int(count)
    return counts


def test_a_namespace_selector_keeps_labelled_namespaces_apart_as_kube_does(
    kube_api: client.ApiClient, running_stack: stack.Stack, kube_scheduler: str
) -> None:
    ours = run_scenario(kube_api, kube.DEFAULT_SCHEDULER_NAME)
    theirs = run_scenario(kube_api, kube_scheduler)
    try:
        for run in (ours, theirs):
            assert run["first"] != run["second"], run  # the team's pods are kept apart
            assert "didn't match pod anti-affinity rules" in run["waiting"], run
        ours_why, theirs_why = reasons(ours["waiting"]), reasons(theirs["waiting"])
        assert ours_why == theirs_why

        # Ours only: relabelling a2 out of the team frees p2's node for p3 at once.
        _, a2, b = ours["namespaces"]
        client.CoreV1Api(kube_api).patch_namespace(a2, {"metadata": {"labels": {"team": "x"}}})
        assert wait_node(kube_api, b, "p3", timeout=30) == ours["second"]
    finally:
        for run in (ours, theirs):
            for ns in run["namespaces"]:
                kube.delete_namespace(kube_api, ns, wait=False)


def test_a_node_holding_the_pods_image_wins_for_both_schedulers(
    kube_api: client.ApiClient, running_stack: stack.Stack, kube_scheduler: str
) -> None:
    """Two equal nodes, one reporting a 900 MiB image in status.images: the pod that uses
    it lands there (ImageLocality, weight 1, is all that tells the nodes apart)."""
    pool = f"img-{uuid.uuid4().hex[:5]}"
    names = kube.create_kwok_nodes(
        kube_api, 2, name_prefix=pool, cpu="8", memory="16Gi", labels={"pool": pool}
    )
    image = f"registry.example/{pool}/model:1"
    core = client.CoreV1Api(kube_api)
    status = {"status": {"images": [{"names": [image], "sizeBytes": 900 * MB}]}}
    core.patch_node_status(names[1], status)
    ns = kube.create_namespace(kube_api, prefix="images")
    try:
        kube.wait_for(
            lambda: core.read_node(names[1]).status.images or None,
            timeout=30,
            interval=0.5,
            message="kwok keeps the node's images",
        )
        for scheduler in (kube.DEFAULT_SCHEDULER_NAME, kube_scheduler):
            pod = kube.make_pod(
                f"uses-{scheduler}", scheduler_name=scheduler, node_selector={"pool": pool}
            )
            pod["spec"]["containers"][0]["image"] = image
            kube.create_pods(kube_api, namespace=ns, pods=[pod])
            assert wait_node(kube_api, ns, f"uses-{scheduler}") == names[1], scheduler
    finally:
        kube.delete_namespace(kube_api, ns, wait=False)
        kube.delete_nodes(kube_api, names)
