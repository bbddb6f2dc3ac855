"""Defence in depth (issue 17): a binder called by a trusted client still refuses a pod of
another scheduler, a victim not lower in priority than its preemptor and a node that does
not exist. Each refusal writes nothing to the API, is reported FAILED (the scheduler
requeues the pod with backoff, as for any failed bind), logged with the caller and
counted. In process, against the fake API (``tests/support/fakes/kube.py``)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from services.binder import apirequests
from splitsched.v1 import binder_pb2, scheduler_pb2, types_pb2
from tests.support.binder import Harness, add_pod, bind_request, eventually, harness, run
from tests.support.fakes.kube import FakePod, PreemptKube

Outcome = scheduler_pb2.BindingOutcome
REFUSED = "refused by the binder"


async def accept_bind(h: Harness, request: binder_pb2.BindRequest) -> None:
    response = await h.stub.Bind(request)
    assert response.accepted, response.reason


async def accept_preempt(h: Harness, request: binder_pb2.PreemptRequest) -> None:
    ack = await h.stub.Preempt(request)
    assert ack.accepted, ack.reason


def refused(h: Harness, reason: str) -> float:
    value = h.metrics.registry.get_sample_value(
        "splitsched_binder_refused_total", {"reason": reason}
    )
    return value or 0.0


def refusal_line(caplog: pytest.LogCaptureFixture) -> str:
    """The one refusal the binder logged."""
    (line,) = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    return line


def ref(name: str) -> types_pb2.PodRef:
    return types_pb2.PodRef(namespace="ns", name=name, uid=f"uid-{name}")


def preempt(
    decision_id: str, *, victims: tuple[str, ...], node: str = "node-a"
) -> binder_pb2.PreemptRequest:
    return binder_pb2.PreemptRequest(
        decision_id=decision_id, preemptor=ref("high"), node=node,
        victims=[ref(v) for v in victims],
    )  # fmt: skip


def test_a_pod_of_another_scheduler_is_not_bound(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="services.binder.admission")

    async def body() -> None:
        async with harness(profiles=("splitsched", "splitsched-binpack")) as h:
            add_pod(h, "theirs")
            h.kube.pods[("ns", "theirs")].scheduler_name = "default-scheduler"
            add_pod(h, "binpack")
            h.kube.pods[("ns", "binpack")].scheduler_name = "splitsched-binpack"
            await accept_bind(h, bind_request("d1", "theirs", node="node-a"))
            await accept_bind(h, bind_request("d2", "binpack", node="node-a"))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.FAILED
            assert outcome.message.startswith(f"{REFUSED} (scheduler_name): pod ns/theirs ")
            assert "'default-scheduler'" in outcome.message
            assert (await h.outcome("d2")).result == Outcome.BOUND
            assert [name for _, _, name, _ in h.kube.bindings] == ["binpack"]
            assert h.kube.pods[("ns", "theirs")].node == ""
            assert not [e for e in h.kube.events if e["regarding"]["name"] == "theirs"]
            assert refused(h, "scheduler_name") == 1

    run(body())
    line = refusal_line(caplog)
    assert line.startswith("refused binding ns/theirs to node-a asked by ipv4:127.0.0.1:")
    assert "(no client certificate)" in line


def test_a_node_that_does_not_exist_is_refused_and_one_that_does_is_read_once() -> None:
    async def body() -> None:
        async with harness() as h:
            for name in ("p1", "p2", "p3"):
                add_pod(h, name)
            h.kube.missing_nodes.add("ghost")
            await accept_bind(h, bind_request("d1", "p1", node="ghost"))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.FAILED
            assert outcome.message == f"{REFUSED} (node_missing): node 'ghost' does not exist"
            assert h.kube.bindings == []
            for decision, name in (("d2", "p2"), ("d3", "p3")):
                await accept_bind(h, bind_request(decision, name, node="node-a"))
                assert (await h.outcome(decision)).result == Outcome.BOUND
            assert h.kube.reads.count("/api/v1/nodes/node-a") == 1  # remembered
            assert refused(h, "node_missing") == 1

    run(body())


def test_the_node_is_read_while_the_pod_read_is_in_flight() -> None:
    """The two reads before a Binding overlap (one round trip, not two); the Binding
    still waits for both."""

    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1")
            h.kube.hold_pod_reads = asyncio.Event()
            await accept_bind(h, bind_request("d1", "p1", node="node-b"))
            await eventually(lambda: "/api/v1/nodes/node-b" in h.kube.reads)
            assert h.kube.bindings == []
            h.kube.hold_pod_reads.set()
            assert (await h.outcome("d1")).result == Outcome.BOUND
            assert h.kube.reads.count("/api/v1/namespaces/ns/pods/p1") == 1

    run(body())


def test_a_victim_not_lower_in_priority_is_not_evicted_and_nothing_is_written() -> None:
    async def body() -> None:
        kube = PreemptKube()
        kube.pods[("ns", "high")] = FakePod(uid="uid-high", priority=1000)
        kube.pods[("ns", "low")] = FakePod(uid="uid-low", node="node-a", priority=10)
        kube.pods[("ns", "peer")] = FakePod(uid="uid-peer", node="node-a", priority=1000)
        async with harness(kube=kube) as h:
            await accept_preempt(h, preempt("x1", victims=("low", "peer")))
            outcome = await h.outcome("x1")
            assert outcome.result == Outcome.FAILED
            assert outcome.message.startswith(f"{REFUSED} (victim_priority): victim ns/peer ")
            assert "priority 1000, not lower than preemptor ns/high's 1000" in outcome.message
            assert kube.writes == []  # no nomination, no eviction of either victim
            assert ("ns", "peer") in kube.pods and ("ns", "low") in kube.pods
            assert refused(h, "victim_priority") == 1
            # Lower victims only: preempted as before.
            await accept_preempt(h, preempt("x2", victims=("low",)))
            assert (await h.outcome("x2")).result == Outcome.BOUND
            assert kube.evicted_names() == ["low"]

    run(body())


def test_a_preemption_for_a_foreign_preemptor_or_a_missing_node_is_refused() -> None:
    async def body() -> None:
        kube = PreemptKube()
        kube.pods[("ns", "high")] = FakePod(uid="uid-high", priority=1000)
        kube.pods[("ns", "low")] = FakePod(uid="uid-low", node="node-a")
        kube.missing_nodes.add("ghost")
        async with harness(kube=kube) as h:
            await accept_preempt(h, preempt("x1", victims=("low",), node="ghost"))
            outcome = await h.outcome("x1")
            assert outcome.message.startswith(f"{REFUSED} (node_missing)")
            kube.pods[("ns", "high")].scheduler_name = "other"
            await accept_preempt(h, preempt("x2", victims=("low",)))
            outcome = await h.outcome("x2")
            assert outcome.result == Outcome.FAILED
            assert outcome.message.startswith(f"{REFUSED} (scheduler_name): preemptor ns/high ")
            assert kube.writes == []
            assert refused(h, "node_missing") == refused(h, "scheduler_name") == 1
            assert (
                h.metrics.registry.get_sample_value(
                    "splitsched_binder_preemptions_total", {"result": "FAILED"}
                )
                == 2
            )

    run(body())


def report(name: str) -> binder_pb2.UnschedulableReport:
    return binder_pb2.UnschedulableReport(
        pod=ref(name), message="0/3 nodes are available: 3 Insufficient cpu.",
        reason="Unschedulable", profile="splitsched",
    )  # fmt: skip


def test_an_unschedulable_report_about_a_pod_of_another_scheduler_writes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="services.binder.admission")

    async def body() -> None:
        async with harness() as h:
            add_pod(h, "theirs")
            h.kube.pods[("ns", "theirs")].scheduler_name = "default-scheduler"
            add_pod(h, "ours")
            for name in ("theirs", "ours"):
                ack = await h.stub.ReportUnschedulable(report(name))
                assert ack.accepted, ack.reason
            await eventually(lambda: refused(h, "scheduler_name") == 1)
            await eventually(lambda: h.kube.events and h.kube.patches)
            assert [e["regarding"]["name"] for e in h.kube.events] == ["ours"]
            assert [name for _, name, _, _ in h.kube.patches] == ["ours"]

    run(body())
    line = refusal_line(caplog)
    assert line.startswith("refused FailedScheduling report for ns/theirs asked by ipv4:")
    assert "schedulerName 'default-scheduler', not a profile this binder serves" in line


def test_an_unschedulable_report_without_a_uid_is_written_for_a_pod_of_a_served_profile() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "ours")
            request = report("ours")
            request.pod.uid = ""
            assert (await h.stub.ReportUnschedulable(request)).accepted
            await eventually(lambda: h.kube.events and h.kube.patches)
            assert "uid" not in h.kube.events[0]["regarding"]
            assert refused(h, "scheduler_name") == 0

    run(body())


def test_the_node_is_read_from_the_watch_cache_and_from_etcd_only_before_a_refusal() -> None:
    """A node is read with ``resourceVersion=0`` (the API server's cache, no etcd read); one
    the cache does not show is read again from etcd, so a cache that lags the node's
    creation does not refuse the binding, and a node missing from both is refused."""

    async def body() -> None:
        async with harness() as h:
            for name in ("p1", "p2", "p3"):
                add_pod(h, name)
            h.kube.uncached_nodes.add("new-node")
            h.kube.missing_nodes.add("ghost")
            await accept_bind(h, bind_request("d1", "p1", node="node-a"))
            await accept_bind(h, bind_request("d2", "p2", node="new-node"))
            await accept_bind(h, bind_request("d3", "p3", node="ghost"))
            assert (await h.outcome("d1")).result == Outcome.BOUND
            assert (await h.outcome("d2")).result == Outcome.BOUND
            assert (await h.outcome("d3")).result == Outcome.FAILED
            node_reads = [q for q in h.kube.read_queries if q.startswith("/api/v1/nodes/")]
            assert sorted(node_reads) == [
                "/api/v1/nodes/ghost",
                "/api/v1/nodes/ghost?resourceVersion=0",
                "/api/v1/nodes/new-node",
                "/api/v1/nodes/new-node?resourceVersion=0",
                "/api/v1/nodes/node-a?resourceVersion=0",
            ]
            assert refused(h, "node_missing") == 1

    run(body())


def test_nodes_a_list_shows_are_not_read_one_by_one() -> None:
    """One list of the nodes' names stands for a read of each (``knownnodes``); a
    node the list does not show is read on its own before it is refused or bound."""

    async def body() -> None:
        async with harness() as h:
            for name in ("p1", "p2", "p3", "p4"):
                add_pod(h, name)
            h.kube.node_list = ["node-a", "node-b"]
            h.kube.missing_nodes.add("ghost")
            for decision, name, node in (
                ("d1", "p1", "node-a"), ("d2", "p2", "node-b"),
                ("d3", "p3", "node-new"), ("d4", "p4", "ghost"),
            ):  # fmt: skip
                await accept_bind(h, bind_request(decision, name, node=node))
            assert [(await h.outcome(d)).result for d in ("d1", "d2", "d3")] == [Outcome.BOUND] * 3
            assert (await h.outcome("d4")).result == Outcome.FAILED
            assert h.kube.node_lists == [apirequests.TABLE]
            node_reads = {r for r in h.kube.reads if r.startswith("/api/v1/nodes/")}
            assert node_reads == {"/api/v1/nodes/node-new", "/api/v1/nodes/ghost"}
            assert refused(h, "node_missing") == 1

    run(body())
