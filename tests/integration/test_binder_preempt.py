"""Integration test of the binder's ``Preempt`` against the real control plane.

The binder runs as ``python -m services.binder`` with the least-privilege kubeconfig the
stack gives it (``splitsched.testing.stack.BINDER_RULES``: create pods/eviction, patch
pods/status, get pods, create events, create pods/binding) and reports to a fake
``Scheduler`` gRPC server in the test (``tests.support.binderproc``). Victims are bound to
a kwok node (kwok makes them Running and Ready); what the binder did is read back with the
admin client.

kube-controller-manager's disruption controller computes the PodDisruptionBudget's status
from the pods it selects (only Ready pods count as healthy); the test waits for it before
each preemption, because the Eviction API refuses evictions under a PDB whose status has not
been observed ("still being processed").
"""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from splitsched.testing.kube import (
    bind_pod,
    create_kwok_nodes,
    create_pdb,
    create_pods,
    create_priority_classes,
    delete_nodes,
    delete_priority_classes,
    make_pod,
    wait_for,
    wait_pdb_observed,
)
from splitsched.testing.stack import BINDER_RULES
from splitsched.v1 import binder_pb2, scheduler_pb2, types_pb2
from tests.support.binderproc import BinderProcess, run_binder

Outcome = scheduler_pb2.BindingOutcome

PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def binder(kube_api: client.ApiClient, namespace: str, tmp_path: Path) -> Iterator[BinderProcess]:
    with run_binder(
        kube_api, namespace=namespace, directory=tmp_path, rules=BINDER_RULES,
        extra_args=["--shutdown-grace", "2", "--preempt-deadline", "10"],
    ) as process:  # fmt: skip
        yield process


@pytest.fixture
def node(kube_api: client.ApiClient) -> Iterator[str]:
    (name,) = create_kwok_nodes(
        kube_api, 1, name_prefix=f"preempt-{uuid.uuid4().hex[:6]}", cpu="4", memory="8Gi"
    )
    yield name
    delete_nodes(kube_api, [name])


@pytest.fixture
def high_class(kube_api: client.ApiClient) -> Iterator[str]:
    """A PriorityClass above the victims' (none: 0): the binder evicts only pods of lower
    priority than the preemptor's."""
    classes = create_priority_classes(
        kube_api, {"high": (1000, "PreemptLowerPriority")}, prefix="binder-preempt"
    )
    yield classes["high"]
    delete_priority_classes(kube_api, classes)


def _pod_or_none(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    try:
        return core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _running_and_ready(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    pod = _pod_or_none(core, namespace, name)
    if pod is None or pod.status.phase != "Running":
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _gone_or_terminating(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    pod = _pod_or_none(core, namespace, name)
    return pod is None or pod.metadata.deletion_timestamp is not None


def _preempt(
    b: BinderProcess, *, decision_id: str, namespace: str, preemptor: Any, node: str,
    victims: list[Any],
) -> Outcome:  # fmt: skip
    ack = b.stub.Preempt(
        binder_pb2.PreemptRequest(
            decision_id=decision_id,
            preemptor=types_pb2.PodRef(
                namespace=namespace, name=preemptor.metadata.name, uid=preemptor.metadata.uid
            ),
            node=node,
            victims=[
                types_pb2.PodRef(namespace=namespace, name=v.metadata.name, uid=v.metadata.uid)
                for v in victims
            ],
        ),
        timeout=10,
    )
    assert ack.accepted, ack.reason
    return b.scheduler.outcome(decision_id)


def _metric(b: BinderProcess, line_start: str) -> float:
    with urllib.request.urlopen(f"{b.http_url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_preempt_nominates_evicts_and_respects_the_pdb(
    core_api: client.CoreV1Api, kube_api: client.ApiClient, namespace: str, node: str,
    binder: BinderProcess, high_class: str,
) -> None:  # fmt: skip
    create_pods(
        kube_api, namespace=namespace,
        pods=[make_pod("db-0", labels={"app": "db"}), make_pod("batch-0"),
              make_pod("high", priority_class_name=high_class)],
    )  # fmt: skip
    for victim in ("db-0", "batch-0"):
        assert bind_pod(kube_api, namespace=namespace, pod=victim, node=node) == 201
    # A PDB only counts Ready pods as healthy; wait for kwok to run them.
    wait_for(
        lambda: all(_running_and_ready(core_api, namespace, v) for v in ("db-0", "batch-0")),
        message="victims Running and Ready",
    )
    pdb_spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}
    # One Ready db pod and minAvailable 1: no disruption allowed.
    create_pdb(kube_api, namespace=namespace, name="db-pdb", spec=pdb_spec, allowed=0)
    try:
        db, batch = (core_api.read_namespaced_pod(n, namespace) for n in ("db-0", "batch-0"))
        high = core_api.read_namespaced_pod("high", namespace)

        # The PDB protects db-0: refused (429), named in a FAILED outcome; batch-0 evicted.
        refused = _preempt(binder, decision_id="pre-1", namespace=namespace, preemptor=high,
                           node=node, victims=[db, batch])  # fmt: skip
        assert refused.result == Outcome.FAILED, refused.message
        assert refused.message.startswith(f"eviction of {namespace}/db-0 refused: {PDB_MESSAGE}")
        assert "db-pdb" in refused.message
        assert refused.last_http_status == 429
        assert refused.pod.uid == high.metadata.uid
        assert refused.node == node
        assert wait_for(lambda: _gone_or_terminating(core_api, namespace, "batch-0"),
                        message="batch-0 evicted")  # fmt: skip
        still = core_api.read_namespaced_pod("db-0", namespace)
        assert still.metadata.deletion_timestamp is None
        assert still.metadata.uid == db.metadata.uid
        nominated = core_api.read_namespaced_pod("high", namespace).status.nominated_node_name
        assert nominated == node
        events = wait_for(
            lambda: (
                core_api.list_namespaced_event(
                    namespace, field_selector="involvedObject.name=batch-0,reason=Preempted"
                ).items
            ),
            message="Preempted event on batch-0",
        )
        assert events[0].type == "Normal"
        assert events[0].message == f"Preempted by pod {high.metadata.uid} on node {node}"
        assert events[0].involved_object.uid == batch.metadata.uid
        assert not core_api.list_namespaced_event(
            namespace, field_selector="involvedObject.name=db-0,reason=Preempted"
        ).items

        # A second replica runs and is Ready, so one disruption is allowed: db-0 goes;
        # batch-0 is already gone (404).
        create_pods(kube_api, namespace=namespace, pods=[make_pod("db-1", labels={"app": "db"})])
        assert bind_pod(kube_api, namespace=namespace, pod="db-1", node=node) == 201
        wait_for(lambda: _running_and_ready(core_api, namespace, "db-1"), message="db-1 Ready")
        wait_pdb_observed(kube_api, namespace=namespace, name="db-pdb", allowed=1)
        done = _preempt(binder, decision_id="pre-2", namespace=namespace, preemptor=high,
                        node=node, victims=[db, batch])  # fmt: skip
        assert done.result == Outcome.BOUND, done.message
        assert done.message == "preempted 2 victims (1 already gone)"
        assert wait_for(lambda: _gone_or_terminating(core_api, namespace, "db-0"),
                        message="db-0 evicted")  # fmt: skip

        # A preemptor that is gone: POD_GONE.
        core_api.delete_namespaced_pod("high", namespace, grace_period_seconds=0)
        wait_for(lambda: _pod_or_none(core_api, namespace, "high") is None, message="deleted")
        gone = _preempt(binder, decision_id="pre-3", namespace=namespace, preemptor=high,
                        node=node, victims=[])  # fmt: skip
        assert gone.result == Outcome.POD_GONE, gone.message

        assert _metric(binder, 'splitsched_binder_evictions_total{code="429"}') == 1
        assert _metric(binder, 'splitsched_binder_evictions_total{code="201"}') == 2
        assert _metric(binder, 'splitsched_binder_evictions_total{code="404"}') == 1
        for result in ("FAILED", "BOUND", "POD_GONE"):
            line = f'splitsched_binder_preemptions_total{{result="{result}"}}'
            assert _metric(binder, line) == 1
    finally:
        client.PolicyV1Api(kube_api).delete_namespaced_pod_disruption_budget("db-pdb", namespace)


def test_a_victim_not_lower_than_its_preemptor_is_refused_and_keeps_running(
    core_api: client.CoreV1Api, kube_api: client.ApiClient, namespace: str, node: str,
    binder: BinderProcess, high_class: str,
) -> None:  # fmt: skip
    """A trusted caller asks to evict a pod as high as the preemptor: refused, nothing
    written (no nomination, no eviction), counted."""
    create_pods(
        kube_api, namespace=namespace,
        pods=[make_pod("peer", priority_class_name=high_class),
              make_pod("high", priority_class_name=high_class)],
    )  # fmt: skip
    assert bind_pod(kube_api, namespace=namespace, pod="peer", node=node) == 201
    peer, high = (core_api.read_namespaced_pod(n, namespace) for n in ("peer", "high"))
    outcome = _preempt(binder, decision_id="pre-x", namespace=namespace, preemptor=high,
                       node=node, victims=[peer])  # fmt: skip
    assert outcome.result == Outcome.FAILED
    assert outcome.message.startswith("refused by the binder (victim_priority)"), outcome.message
    still = core_api.read_namespaced_pod("peer", namespace)
    assert still.metadata.uid == peer.metadata.uid and still.metadata.deletion_timestamp is None
    assert not core_api.read_namespaced_pod("high", namespace).status.nominated_node_name
    assert _metric(binder, 'splitsched_binder_refused_total{reason="victim_priority"}') == 1
