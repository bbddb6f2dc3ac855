"""Service tests of the binder's ``Preempt`` RPC, in process: its gRPC server and worker pool
against a fake Kubernetes API and a fake ``Scheduler`` collecting outcomes.

The harness comes from ``tests/support/binder.py``; ``PreemptKube``
(``tests/support/fakes/kube.py``) extends the fake API with what a preemption touches,
behaving like kube-apiserver: the merge PATCH of ``pods/{name}/status`` (404 when the pod
is gone, 422 when the patch's ``metadata.uid`` is not the pod's) and the Eviction
subresource (404 gone, 409 uid precondition failed, 429 with a ``DisruptionBudget`` cause
when a PodDisruptionBudget allows no disruption, else the pod is deleted), both scriptable
with 5xx / connection resets / held answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.binder import worker
from services.binder.preemption import EVICTION_CONCURRENCY
from services.binder.server import MAX_VICTIMS
from splitsched.v1 import binder_pb2, scheduler_pb2, types_pb2
from tests.support.binder import Harness, eventually, harness, run
from tests.support.fakes.kube import PDB_MESSAGE, FakePod, PreemptKube, Scripted

Outcome = scheduler_pb2.BindingOutcome
#: The preemptors' spec.priority (the victims have none: 0), as kube-scheduler would pick.
HIGH = 1000


# -- helpers -------------------------------------------------------------------------------


def pod_ref(name: str, *, namespace: str = "ns", uid: str | None = None) -> types_pb2.PodRef:
    return types_pb2.PodRef(namespace=namespace, name=name, uid=uid or f"uid-{name}")


def preempt_request(
    decision_id: str,
    *,
    preemptor: str = "high",
    victims: tuple[str, ...] = ("v1", "v2"),
    node: str = "node-a",
) -> binder_pb2.PreemptRequest:
    return binder_pb2.PreemptRequest(
        decision_id=decision_id,
        preemptor=pod_ref(preemptor),
        node=node,
        victims=[pod_ref(v) for v in victims],
        message="preempting 2 pods on node-a",
        trace_context={"traceparent": f"00-{'3' * 32}-{'4' * 16}-01"},
    )


def setup_pods(kube: PreemptKube, *, victims: tuple[str, ...] = ("v1", "v2")) -> None:
    kube.pods[("ns", "high")] = FakePod(uid="uid-high", priority=HIGH)
    for name in victims:
        kube.pods[("ns", name)] = FakePod(uid=f"uid-{name}", node="node-a")


async def accept(h: Harness, request: binder_pb2.PreemptRequest) -> None:
    ack = await h.stub.Preempt(request)
    assert ack.accepted, ack.reason
    assert ack.reason == ""


def metric(h: Harness, name: str, **labels: str) -> float:
    return h.metrics.registry.get_sample_value(name, labels) or 0.0


def shutdown_reports(h: Harness, decision_id: str) -> list[Outcome]:
    return [
        o
        for o in h.scheduler.for_decision(decision_id)
        if o.message.startswith("binder shutting down")
    ]


def preempted_events(kube: PreemptKube) -> list[dict[str, Any]]:
    return [e for e in kube.events if e["reason"] == "Preempted"]


# -- the successful path -------------------------------------------------------------------


def test_nominates_then_evicts_with_uid_preconditions_and_reports_bound() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube)
            await accept(h, preempt_request("p1"))
            outcome = await h.outcome("p1")
            assert outcome.result == Outcome.BOUND, outcome.message
            assert outcome.message == "preempted 2 victims"
            assert outcome.pod == pod_ref("high")
            assert outcome.node == "node-a"
            assert outcome.attempts == 3  # one PATCH, two Evictions
            assert outcome.last_http_status == 201
            assert outcome.binder_id == "binder-test"
            assert outcome.trace_context["traceparent"].startswith("00-333")
            # The nomination: a uid-checked merge patch, written before any eviction.
            assert kube.writes[0] == ("patch", "ns", "high")
            assert sorted(kube.writes[1:]) == [("evict", "ns", "v1"), ("evict", "ns", "v2")]
            (ns, name, content_type, patch) = kube.patches[0]
            assert (ns, name) == ("ns", "high")
            assert content_type == "application/merge-patch+json"
            assert patch == {"metadata": {"uid": "uid-high"},
                             "status": {"nominatedNodeName": "node-a"}}  # fmt: skip
            assert kube.nominated[("ns", "high")] == "node-a"
            # The Evictions carry the victims' uids as preconditions.
            sent = {name: b for _, name, b in kube.evictions}
            assert sent["v1"] == {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": "v1", "namespace": "ns"},
                "deleteOptions": {"preconditions": {"uid": "uid-v1"}},
            }
            assert sent["v2"]["deleteOptions"] == {"preconditions": {"uid": "uid-v2"}}
            assert ("ns", "v1") not in kube.pods and ("ns", "v2") not in kube.pods
            # A Preempted Event on each victim, like kube-scheduler's.
            events = await eventually(lambda: len(preempted_events(kube)) == 2 or None)
            assert events
            by_victim = {e["regarding"]["name"]: e for e in preempted_events(kube)}
            assert set(by_victim) == {"v1", "v2"}
            event = by_victim["v1"]
            assert event["apiVersion"] == "events.k8s.io/v1"
            assert event["type"] == "Normal"
            assert event["action"] == "Preempting"
            assert event["note"] == "Preempted by pod uid-high on node node-a"
            assert event["regarding"]["uid"] == "uid-v1"
            assert event["metadata"]["namespace"] == "ns"
            assert event["related"] == {
                "apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "high",
                "uid": "uid-high",
            }  # fmt: skip
            assert event["reportingController"] == "splitsched"
            assert metric(h, "splitsched_binder_evictions_total", code="201") == 2
            assert metric(h, "splitsched_binder_preemptions_total", result="BOUND") == 1
            # Preemptions are not counted as bindings.
            assert metric(h, "splitsched_binder_outcomes_total", result="BOUND") == 0

    run(body())


def test_victims_already_gone_or_recreated_count_as_done() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube, victims=("v2",))  # v1 is gone (404)
            kube.pods[("ns", "v3")] = FakePod(uid="uid-v3-new", node="node-a")  # re-created
            await accept(h, preempt_request("p1", victims=("v1", "v2", "v3")))
            outcome = await h.outcome("p1")
            assert outcome.result == Outcome.BOUND, outcome.message
            assert outcome.message == "preempted 3 victims (2 already gone)"
            assert sorted(kube.evicted_names()) == ["v1", "v2", "v3"]
            assert ("ns", "v3") in kube.pods  # the new pod of that name is not touched
            assert metric(h, "splitsched_binder_evictions_total", code="404") == 1
            assert metric(h, "splitsched_binder_evictions_total", code="409") == 1
            await eventually(lambda: preempted_events(kube))
            await asyncio.sleep(0.05)
            assert [e["regarding"]["name"] for e in preempted_events(kube)] == ["v2"]

    run(body())


def test_no_victims_only_nominates() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube, victims=())
            await accept(h, preempt_request("p1", victims=()))
            outcome = await h.outcome("p1")
            assert outcome.result == Outcome.BOUND
            assert outcome.message == "preempted 0 victims"
            assert kube.nominated == {("ns", "high"): "node-a"}
            assert kube.evictions == []

    run(body())


def test_5xx_and_network_errors_are_retried_with_backoff() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube)
            kube.patch_script[("ns", "high")] = [Scripted(503), Scripted(reset=True)]
            kube.evict_script[("ns", "v1")] = [Scripted(500), Scripted(429, retry_after="0")]
            await accept(h, preempt_request("p1"))
            outcome = await h.outcome("p1")
            assert outcome.result == Outcome.BOUND, outcome.message
            assert outcome.attempts == 3 + 3 + 1
            assert [w[2] for w in kube.writes[:3]] == ["high"] * 3
            assert kube.evicted_names().count("v1") == 3
            assert metric(h, "splitsched_binder_evictions_total", code="500") == 1
            assert metric(h, "splitsched_binder_evictions_total", code="429") == 1
            assert ("ns", "v1") not in kube.pods
            assert 0.0 in h.sleeps  # Retry-After: 0 honoured

    run(body())


# -- refusals and failures -----------------------------------------------------------------


def test_pdb_refusal_is_failed_naming_the_victim() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube)
            kube.pdbs[("ns", "v1")] = "db-pdb"
            await accept(h, preempt_request("p1"))
            outcome = await h.outcome("p1")
            assert outcome.result == Outcome.FAILED
            assert outcome.message.startswith(f"eviction of ns/v1 refused: {PDB_MESSAGE}")
            assert "db-pdb needs 1 healthy pods" in outcome.message
            assert outcome.message.endswith("evicted 1 of 2 victims")
            assert outcome.last_http_status == 429
            assert kube.evicted_names().count("v1") == 1  # a PDB refusal is not retried
            assert ("ns", "v1") in kube.pods
            assert ("ns", "v2") not in kube.pods  # already in flight: evicted
            assert kube.nominated[("ns", "high")] == "node-a"
            assert metric(h, "splitsched_binder_evictions_total", code="429") == 1
            assert metric(h, "splitsched_binder_preemptions_total", result="FAILED") == 1
            await eventually(lambda: preempted_events(kube))
            assert [e["regarding"]["name"] for e in preempted_events(kube)] == ["v2"]

    run(body())


def test_a_refusal_leaves_victims_not_yet_attempted_alone() -> None:
    async def body() -> None:
        kube = PreemptKube()
        victims = tuple(f"v{i}" for i in range(EVICTION_CONCURRENCY + 4))
        async with harness(kube=kube) as h:
            setup_pods(kube, victims=victims)
            kube.pdbs[("ns", "v0")] = "db-pdb"
            release = asyncio.Event()
            for name in victims[1:]:
                kube.evict_script[("ns", name)] = [Scripted(201, hold=release)]
            await accept(h, preempt_request("p1", victims=victims))
            # The refusal is in; the other evictions in flight are still unanswered.
            await eventually(
                lambda: metric(h, "splitsched_binder_evictions_total", code="429") == 1
            )
            release.set()
            outcome = await h.outcome("p1")
            assert outcome.result == Outcome.FAILED
            assert outcome.message.startswith("eviction of ns/v0 refused")
            started = EVICTION_CONCURRENCY - 1
            assert outcome.message.endswith(
                f"evicted {started} of {len(victims)} victims, 4 not attempted"
            )
            assert len(kube.evictions) == EVICTION_CONCURRENCY
            for name in victims[EVICTION_CONCURRENCY:]:
                assert ("ns", name) in kube.pods

    run(body())


def test_other_eviction_errors_are_failed_with_their_status() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube, victims=("v1",))
            kube.evict_script[("ns", "v1")] = [Scripted(403, message="forbidden by policy")]
            await accept(h, preempt_request("p1", victims=("v1",)))
            outcome = await h.outcome("p1")
            assert outcome.result == Outcome.FAILED
            assert outcome.message.startswith(
                "eviction of ns/v1 failed: HTTP 403: forbidden by policy"
            )
            assert outcome.last_http_status == 403

    run(body())


def test_deadline_stops_retries() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube, preempt_deadline=0.5) as h:
            setup_pods(kube, victims=("v1",))
            kube.evict_script[("ns", "v1")] = [Scripted(503) for _ in range(1000)]
            await accept(h, preempt_request("p1", victims=("v1",)))
            outcome = await h.outcome("p1")
            assert outcome.result == Outcome.DEADLINE_EXCEEDED
            assert outcome.message.startswith("eviction of ns/v1: deadline exceeded after")
            assert "HTTP 503" in outcome.message
            assert outcome.last_http_status == 503
            assert ("ns", "v1") in kube.pods
            assert metric(h, "splitsched_binder_preemptions_total",
                          result="DEADLINE_EXCEEDED") == 1  # fmt: skip

    run(body())


# -- the preemptor -------------------------------------------------------------------------


def test_preemptor_gone_or_recreated_is_pod_gone_and_evicts_nothing() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube)
            del kube.pods[("ns", "high")]
            await accept(h, preempt_request("gone"))
            outcome = await h.outcome("gone")
            assert outcome.result == Outcome.POD_GONE
            assert outcome.last_http_status == 404
            kube.pods[("ns", "high")] = FakePod(uid="uid-high-2", priority=HIGH)  # re-created
            await accept(h, preempt_request("recreated"))
            outcome = await h.outcome("recreated")
            assert outcome.result == Outcome.POD_GONE
            assert "re-created" in outcome.message
            assert outcome.last_http_status == 422
            assert ("ns", "high") not in kube.nominated
            kube.pods[("ns", "high")] = FakePod(uid="uid-high", deleting=True, priority=HIGH)
            await accept(h, preempt_request("deleting"))
            outcome = await h.outcome("deleting")
            assert outcome.result == Outcome.POD_GONE
            assert outcome.message == "preemptor is being deleted"
            assert kube.evictions == []
            assert ("ns", "v1") in kube.pods and ("ns", "v2") in kube.pods
            assert metric(h, "splitsched_binder_preemptions_total", result="POD_GONE") == 3

    run(body())


def test_preemptor_already_bound_is_conflict() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube)
            kube.pods[("ns", "high")].node = "node-b"
            await accept(h, preempt_request("p1"))
            outcome = await h.outcome("p1")
            assert outcome.result == Outcome.CONFLICT
            assert "node-b" in outcome.message
            assert kube.evictions == []

    run(body())


# -- the gRPC surface ----------------------------------------------------------------------


def test_invalid_requests_are_refused_with_a_reason_naming_the_field() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            good = preempt_request("d1")
            cases: list[tuple[binder_pb2.PreemptRequest, str]] = []

            def variant(change: Any, word: str) -> None:
                r = binder_pb2.PreemptRequest()
                r.CopyFrom(good)
                change(r)
                cases.append((r, word))

            variant(lambda r: setattr(r, "decision_id", ""), "decision_id")
            for attr in ("namespace", "name", "uid"):
                variant(lambda r, a=attr: setattr(r.preemptor, a, ""), f"preemptor.{attr}")
                variant(lambda r, a=attr: setattr(r.victims[1], a, ""), f"victims[1].{attr}")
            variant(lambda r: setattr(r, "node", ""), "node")
            variant(lambda r: r.victims.append(pod_ref("v1")), "victims[2] (ns/v1) is listed")
            variant(lambda r: r.victims.append(pod_ref("high")), "is the preemptor")
            variant(
                lambda r: r.victims.extend(pod_ref(f"x{i}") for i in range(MAX_VICTIMS)),
                f"at most {MAX_VICTIMS}",
            )
            for request, word in cases:
                ack = await h.stub.Preempt(request)
                assert not ack.accepted, word
                assert ack.reason.startswith("invalid request: ")
                assert word in ack.reason, (word, ack.reason)
            assert kube.patches == [] and kube.evictions == []
            # Exactly the limit is fine.
            full = binder_pb2.PreemptRequest()
            full.CopyFrom(good)
            full.decision_id = "d-full"
            del full.victims[:]
            full.victims.extend(pod_ref(f"x{i}") for i in range(MAX_VICTIMS))
            await accept(h, full)
            outcome = await h.outcome("d-full")
            assert outcome.result == Outcome.POD_GONE  # no such preemptor: nothing evicted

    run(body())


def test_same_decision_id_is_accepted_once_and_never_evicts_twice() -> None:
    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube)
            release = asyncio.Event()
            kube.evict_script[("ns", "v1")] = [Scripted(201, hold=release)]
            await accept(h, preempt_request("p1"))
            await eventually(lambda: "v1" in kube.evicted_names())
            await accept(h, preempt_request("p1"))  # while in flight
            release.set()
            assert (await h.outcome("p1")).result == Outcome.BOUND
            # After it finished: accepted, the outcome re-reported, nothing written again.
            await accept(h, preempt_request("p1"))
            await eventually(lambda: len(h.scheduler.for_decision("p1")) == 2)
            assert [o.result for o in h.scheduler.for_decision("p1")] == [Outcome.BOUND] * 2
            assert len(kube.patches) == 1
            assert sorted(kube.evicted_names()) == ["v1", "v2"]
            assert metric(h, "splitsched_binder_preemptions_total", result="BOUND") == 1

    run(body())


def test_shutdown_interrupts_preemptions_and_refuses_new_ones() -> None:
    """Evictions sent but unanswered: IN_PROGRESS (they may still free the room, which the
    scheduler keeps for the preemptor), with the victims. Interrupted before any eviction
    (still nominating): FAILED, nothing was freed."""

    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube)
            kube.pods[("ns", "high2")] = FakePod(uid="uid-high2", priority=HIGH)
            kube.evict_script[("ns", "v1")] = [Scripted(201, hold=asyncio.Event())]  # never
            kube.patch_script[("ns", "high2")] = [Scripted(200, hold=asyncio.Event())]
            await accept(h, preempt_request("p1"))
            await accept(h, preempt_request("p3", preemptor="high2", victims=()))
            await eventually(lambda: "v1" in kube.evicted_names())
            await eventually(lambda: ("patch", "ns", "high2") in kube.writes)
            await h.pool.shutdown(0.2)
            # (The first report of p1 could be a routine IN_PROGRESS heartbeat.)
            (outcome,) = await eventually(lambda: shutdown_reports(h, "p1"))
            assert outcome.result == Outcome.IN_PROGRESS
            assert outcome.preemption
            assert sorted(v.name for v in outcome.victims) == ["v1", "v2"]
            nominating = await h.outcome("p3")
            assert nominating.result == Outcome.FAILED
            assert nominating.message.startswith("binder shutting down")
            ack = await h.stub.Preempt(preempt_request("p2"))
            assert not ack.accepted
            assert ack.reason == "binder shutting down"
            assert len(h.scheduler.for_decision("p1")) == 1

    run(body())


def test_preemptions_in_flight_are_re_reported_in_progress_with_their_victims(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scheduler that takes over learns of a preemption in flight (and its victims) from
    the binder's IN_PROGRESS re-reports, like a binding in flight; a finished one is not
    re-reported."""
    monkeypatch.setattr(worker, "IN_PROGRESS_AFTER", 0.0)

    async def body() -> None:
        kube = PreemptKube()
        async with harness(kube=kube) as h:
            setup_pods(kube)
            release = asyncio.Event()
            kube.evict_script[("ns", "v2")] = [Scripted(201, hold=release)]
            await accept(h, preempt_request("p1"))
            await eventually(lambda: "v2" in kube.evicted_names())
            (report,) = [o for o in h.pool.in_progress() if o.decision_id == "p1"]
            assert report.result == Outcome.IN_PROGRESS
            assert report.preemption
            assert (report.pod.name, report.pod.uid, report.node) == ("high", "uid-high", "node-a")
            assert sorted((v.name, v.uid) for v in report.victims) == [
                ("v1", "uid-v1"),
                ("v2", "uid-v2"),
            ]
            release.set()
            (final,) = await eventually(
                lambda: [o for o in h.scheduler.for_decision("p1") if o.result == Outcome.BOUND]
            )
            assert final.preemption and len(final.victims) == 2
            assert not [o for o in h.pool.in_progress() if o.decision_id == "p1"]

    run(body())
