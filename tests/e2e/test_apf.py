"""API Priority and Fairness squeezing the binders (issue 22, part 3): they receive 429s
with Retry-After, slow down, and still lose nothing; other clients keep being served.

The module runs its own control plane with small in-flight limits (10 + 5 seats for the
whole server, shared by API Priority and Fairness among its levels), so a level of one
share gets one seat even on 2 cores. The services run as least-privilege
ServiceAccounts, the binders as the chart runs them (64 workers, no client-side rate), so
only the hold-off and the in-flight window of ``splitsched.runtime.ratelimit`` slow them
down. Two bursts of pods: the first with the binders in the default level, for a
baseline; then a PriorityLevelConfiguration of one seat, no lending, no borrowing and two
queue places, and a FlowSchema sending the binders' ServiceAccount to it. During the
second burst another ServiceAccount (not exempt, as the admin is) LISTs the namespace's
pods. Checked from the API server's objects and metrics, never by timing: the binders were
throttled (their counter, and the server's rejections for that level), every pod is
bound, none by two decisions (one Scheduled event each), no node over allocatable, and the
other client's LISTs were all served, some while the binders were throttled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from splitsched.testing import invariants, kube, stack
from splitsched.testing.controlplane import ControlPlane

pytestmark = pytest.mark.e2e

#: (--max-requests-inflight, --max-mutating-requests-inflight): 15 seats in all.
SMALL_INFLIGHT = (10, 5)
PODS_PER_BURST = 200
SQUEEZE = "splitsched-binders-squeezed"


@dataclass
class Squeezed:
    """The module's control plane and stack."""

    admin: client.ApiClient
    stack: stack.Stack
    sa_namespace: str
    workdir: Path


@pytest.fixture(scope="module")
def squeezed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Squeezed]:
    workdir = tmp_path_factory.mktemp("apf")
    plane = ControlPlane(workdir / "cluster", die_with_parent=True, inflight=SMALL_INFLIGHT)
    plane.up()
    admin = kube.api_client_from_kubeconfig(plane.kubeconfig_path)
    try:
        kube.create_kwok_nodes(admin, 10, name_prefix="apf", cpu="32", memory="64Gi", pods=110)
        sa_namespace = kube.create_namespace(admin, prefix="splitsched-system")
        configs = stack.component_kubeconfigs(admin, namespace=sa_namespace, directory=workdir)
        running = stack.Stack(
            workdir=workdir / "stack",
            watcher_kubeconfig=configs["watcher"],
            binder_kubeconfig=configs["binder"],
            binders=2,
        )
        running.start(timeout=90)
        try:
            yield Squeezed(admin, running, sa_namespace, workdir)
        finally:
            running.stop()
    finally:
        admin.close()
        plane.down()


def squeeze(admin: client.ApiClient, *, sa_namespace: str) -> None:
    """One seat for the binders' ServiceAccount: no lending, no borrowing, two queued."""
    flowcontrol = client.FlowcontrolApiserverV1Api(admin)
    flowcontrol.create_priority_level_configuration(
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": SQUEEZE},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 1,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
                    "limitResponse": {
                        "type": "Queue",
                        "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 2},
                    },
                },
            },
        }
    )
    flowcontrol.create_flow_schema(
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": SQUEEZE},
            "spec": {
                "priorityLevelConfiguration": {"name": SQUEEZE},
                "matchingPrecedence": 500,
                "rules": [
                    {
                        "subjects": [
                            {
                                "kind": "ServiceAccount",
                                "serviceAccount": {
                                    "name": "splitsched-binder",
                                    "namespace": sa_namespace,
                                },
                            }
                        ],
                        "resourceRules": [
                            {
                                "verbs": ["*"],
                                "apiGroups": ["*"],
                                "resources": ["*"],
                                "clusterScope": True,
                                "namespaces": ["*"],
                            }
                        ],
                    }
                ],
            },
        }
    )


def throttled(running: stack.Stack) -> float:
    return sum(
        _metric(b.metrics(), "splitsched_binder_api_throttled_total")
        for b in running.binder_services
    )


def _metric(text: str, name: str, *, containing: str = "") -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith((name + " ", name + "{")) and containing in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def rejected_for(admin: client.ApiClient, level: str) -> float:
    """The API server's own count of requests its level `level` rejected."""
    text = admin.call_api(
        "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False,
        _return_http_data_only=True,
    ).data.decode()  # fmt: skip
    return _metric(
        text,
        "apiserver_flowcontrol_rejected_requests_total",
        containing=f'priority_level="{level}"',
    )


@dataclass
class OtherClient:
    """Another ServiceAccount LISTing the namespace's pods in a loop: each answer, with
    how many pods were still pending and whether the binders had been throttled yet."""

    api: client.ApiClient
    namespace: str
    running: stack.Stack
    served: list[tuple[int, bool]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def loop(self) -> None:
        core = client.CoreV1Api(self.api)
        while not self.stop.is_set():
            was_throttled = throttled(self.running) > 0
            try:
                pods = core.list_namespaced_pod(self.namespace).items
            except ApiException as exc:
                self.failed.append(f"HTTP {exc.status}: {exc.reason}")
            else:
                pending = sum(1 for p in pods if not p.spec.node_name)
                self.served.append((pending, was_throttled))
            self.stop.wait(0.1)


def burst(admin: client.ApiClient, namespace: str, *, prefix: str) -> float:
    """Create the pods; wait until every one is bound; the seconds it took."""
    start = time.monotonic()
    pods = kube.make_pods(PODS_PER_BURST, name_prefix=prefix, cpu="100m", memory="64Mi")
    kube.create_pods(admin, namespace=namespace, pods=pods)

    def all_bound() -> bool:
        items = client.CoreV1Api(admin).list_namespaced_pod(namespace).items
        return sum(1 for p in items if p.spec.node_name) >= PODS_PER_BURST

    kube.wait_for(all_bound, timeout=300, interval=0.5, message=f"{prefix}: every pod bound")
    return time.monotonic() - start


def check_promises(admin: client.ApiClient, namespace: str) -> None:
    """Every pod bound by one decision, no node over allocatable."""
    nodes, pods = invariants.cluster_state(admin)
    assert invariants.overcommitted(nodes, pods) == []
    path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"

    def every_event() -> list[invariants.Json] | None:
        events = invariants.list_json(admin, path)
        scheduled = {e["regarding"]["name"] for e in events if e.get("reason") == "Scheduled"}
        return events if len(scheduled) == PODS_PER_BURST else None

    events = kube.wait_for(every_event, timeout=60, message="a Scheduled event per pod")
    assert invariants.scheduled_more_than_once(events) == []


def test_squeezed_binders_back_off_lose_nothing_and_others_are_served(
    squeezed: Squeezed,
) -> None:
    admin, running = squeezed.admin, squeezed.stack
    baseline_ns = kube.create_namespace(admin, prefix="apf-baseline")
    baseline = burst(admin, baseline_ns, prefix="base")
    baseline_throttled = throttled(running)
    check_promises(admin, baseline_ns)

    squeeze(admin, sa_namespace=squeezed.sa_namespace)
    namespace = kube.create_namespace(admin, prefix="apf-squeezed")
    other_config = kube.service_account_kubeconfig(
        admin, namespace=namespace, name="other-client", directory=squeezed.workdir,
        cluster_role_rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
    )  # fmt: skip
    other = OtherClient(kube.api_client_from_kubeconfig(other_config), namespace, running)
    # The API server's flow-control configuration follows its objects shortly.
    flowcontrol = client.FlowcontrolApiserverV1Api(admin)
    kube.wait_for(
        lambda: flowcontrol.read_flow_schema_status(SQUEEZE).status.conditions,
        timeout=30,
        message="the squeezing FlowSchema taken up",
    )
    lister = threading.Thread(target=other.loop, name="other-client", daemon=True)
    lister.start()
    try:
        squeezed_seconds = burst(admin, namespace, prefix="sq")
    finally:
        other.stop.set()
        lister.join(timeout=30)
        other.api.close()

    throttles = throttled(running) - baseline_throttled
    rejected = rejected_for(admin, SQUEEZE)
    print(
        f"\nAPF: {PODS_PER_BURST} pods in {baseline:.1f}s unsqueezed "
        f"({baseline_throttled:.0f} throttled answers), {squeezed_seconds:.1f}s squeezed "
        f"({throttles:.0f} throttled answers to the binders; the server rejected "
        f"{rejected:.0f} for level {SQUEEZE}); the other client: {len(other.served)} LISTs "
        f"served, {len(other.failed)} failed"
    )
    assert throttles > 0, "the squeezed binders were never throttled"
    assert rejected > 0
    check_promises(admin, namespace)
    assert other.failed == []
    assert any(pending > 0 and was for pending, was in other.served), (
        "no LIST of the other client was served while the binders were throttled"
    )
