"""The volume step before a Binding (issue 18), in process against a fake API with a fake PV
controller (``tests/support/fakes/volumes.py``): a static PV is claimed the way
kube-scheduler's PreBind claims it, a claim to provision is annotated with the node, the
Binding waits until the PV controller bound every claim; failures are reported with their
reason and write no Binding; the step is idempotent (a retry, or another binder after a
restart, finds its writes done); pods without volumes read no claim."""

from __future__ import annotations

from typing import Any

import pytest

from services.binder import volumes, worker
from splitsched.v1 import binder_pb2, scheduler_pb2
from tests.support.binder import Harness, add_pod, bind_request, eventually, harness, run
from tests.support.fakes.kube import Scripted
from tests.support.fakes.volumes import (
    BIND_COMPLETED,
    SELECTED_NODE,
    VolumeKube,
    claim_object,
    pv_object,
)

Outcome = scheduler_pb2.BindingOutcome
PV_PATH = "/api/v1/persistentvolumes/pv-a"


def stateful_pod(h: Harness, name: str = "web-0", *claims: str) -> None:
    """A pod mounting ``claims`` (default ``data-<name>``), each put in the fake API."""
    add_pod(h, name)
    mounted = claims or (f"data-{name}",)
    h.kube.pods[("ns", name)].volumes = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(mounted)
    ]
    kube = fake(h)
    for claim in mounted:
        if ("ns", claim) not in kube.claims:
            kube.put_claim(claim_object("ns", claim, storageClassName="local"))


def fake(h: Harness) -> VolumeKube:
    assert isinstance(h.kube, VolumeKube)
    return h.kube


def with_volumes(
    request: binder_pb2.BindRequest, *bindings: tuple[str, str]
) -> binder_pb2.BindRequest:
    for claim, pv in bindings:
        request.volume_bindings.add(claim_namespace="ns", claim_name=claim, pv_name=pv)
    return request


async def decide(h: Harness, request: binder_pb2.BindRequest) -> Outcome:
    response = await h.stub.Bind(request)
    assert response.accepted, response.reason
    return await h.outcome(request.decision_id)


def steps(h: Harness, result: str) -> float:
    value = h.metrics.registry.get_sample_value(
        "splitsched_binder_volume_steps_total", {"result": result}
    )
    return value or 0.0


OUR_REF = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "ns",
           "name": "data-web-0", "uid": "uid-data-web-0"}  # fmt: skip


def test_a_static_pv_is_claimed_then_the_pod_bound_once_the_pv_controller_bound_the_claim() -> None:
    async def body() -> None:
        async with harness(kube=VolumeKube()) as h:
            kube = fake(h)
            stateful_pod(h)
            kube.put_pv(pv_object("pv-a"))
            request = with_volumes(bind_request("d1", "web-0"), ("data-web-0", "pv-a"))
            outcome = await decide(h, request)
            assert outcome.result == Outcome.BOUND, outcome.message
            assert kube.timeline == [
                "patch PersistentVolume pv-a",
                "bound ns/data-web-0 to pv-a",
                "binding ns/web-0",
            ]
            ((_, _, patch),) = kube.volume_writes
            assert patch["metadata"]["annotations"] == {
                "pv.kubernetes.io/bound-by-controller": "yes"
            }
            claim_ref = kube.pvs["pv-a"]["spec"]["claimRef"]
            assert {k: claim_ref[k] for k in OUR_REF} == OUR_REF
            assert kube.claim("ns", "data-web-0")["spec"]["volumeName"] == "pv-a"
            assert steps(h, "bound") == 1

    run(body())


def test_a_claim_to_provision_is_annotated_with_the_node_and_waited_for() -> None:
    async def body() -> None:
        async with harness(kube=VolumeKube()) as h:
            kube = fake(h)
            stateful_pod(h)
            request = with_volumes(bind_request("d1", "web-0", node="node-b"), ("data-web-0", ""))
            outcome = await decide(h, request)
            assert outcome.result == Outcome.BOUND, outcome.message
            claim = kube.claim("ns", "data-web-0")
            assert claim["metadata"]["annotations"][SELECTED_NODE] == "node-b"
            assert kube.timeline[0] == "patch PersistentVolumeClaim data-web-0"
            assert kube.timeline[-1] == "binding ns/web-0"
            assert claim["spec"]["volumeName"] == "pvc-uid-data-web-0"

    run(body())


def test_static_pvs_are_claimed_before_claims_are_marked_for_provisioning() -> None:
    async def body() -> None:
        async with harness(kube=VolumeKube()) as h:
            kube = fake(h)
            stateful_pod(h, "web-0", "logs", "data")
            kube.put_pv(pv_object("pv-a"))
            request = with_volumes(bind_request("d1", "web-0"), ("logs", ""), ("data", "pv-a"))
            assert (await decide(h, request)).result == Outcome.BOUND
            writes = [(kind, name) for kind, name, _ in kube.volume_writes]
            assert writes == [("PersistentVolume", "pv-a"), ("PersistentVolumeClaim", "logs")]

    run(body())


def test_a_retry_finds_its_writes_done_and_writes_nothing_again() -> None:
    """After a binder restart, or the scheduler's next attempt: the PV is already claimed
    for the claim and the claim bound, so the step only checks and the pod is bound."""

    async def body() -> None:
        kube = VolumeKube(controller=False)
        async with harness(kube=kube) as h:
            stateful_pod(h)
            kube.put_pv(pv_object("pv-a", claim_ref=OUR_REF))
            request = with_volumes(bind_request("d1", "web-0"), ("data-web-0", "pv-a"))
            # Claimed, but the PV controller has not bound the claim yet: the step waits.
            kube.controller = True
            kube.later(kube.bind_claim_to("pv-a"))
            assert (await decide(h, request)).result == Outcome.BOUND
            assert kube.volume_writes == []
            assert kube.reads.count("/api/v1/persistentvolumes/pv-a") >= 1  # it did check
            again = with_volumes(bind_request("d2", "web-0"), ("data-web-0", "pv-a"))
            h.kube.pods[("ns", "web-0")].node = ""  # unbound again, for the second decision
            assert (await decide(h, again)).result == Outcome.BOUND
            assert kube.volume_writes == []

    run(body())


def failure(outcome: Outcome, reason: str) -> bool:
    return outcome.message.startswith(f"volume binding failed ({reason}): ")


def test_a_pv_taken_by_another_claim_fails_the_decision_with_nothing_written() -> None:
    async def body() -> None:
        async with harness(kube=VolumeKube()) as h:
            kube = fake(h)
            stateful_pod(h)
            other = {**OUR_REF, "name": "data-web-1", "uid": "uid-data-web-1"}
            kube.put_pv(pv_object("pv-a", claim_ref=other))
            request = with_volumes(bind_request("d1", "web-0"), ("data-web-0", "pv-a"))
            outcome = await decide(h, request)
            assert outcome.result == Outcome.FAILED
            assert failure(outcome, "pv_claimed_elsewhere"), outcome.message
            assert "ns/data-web-1" in outcome.message
            assert kube.volume_writes == [] and kube.bindings == []
            assert steps(h, "pv_claimed_elsewhere") == 1

    run(body())


def claim_bound_to(kube: VolumeKube, name: str, pv: str) -> None:
    claim = kube.claim("ns", name)
    claim["spec"]["volumeName"] = pv
    claim["metadata"]["annotations"] = {BIND_COMPLETED: "yes"}


def test_a_claim_bound_to_another_pv_or_gone_fails_the_decision() -> None:
    async def body() -> None:
        async with harness(kube=VolumeKube()) as h:
            kube = fake(h)
            stateful_pod(h, "web-0", "bound", "gone")
            del kube.claims[("ns", "gone")]
            kube.put_pv(pv_object("pv-a"))
            claim_bound_to(kube, "bound", "pv-z")
            outcome = await decide(h, with_volumes(bind_request("d1", "web-0"), ("bound", "pv-a")))
            assert outcome.result == Outcome.FAILED
            assert outcome.message == (
                "volume binding failed (claim_bound_elsewhere): claim ns/bound is bound to PV "
                "'pv-z', not 'pv-a'"
            )
            outcome = await decide(h, with_volumes(bind_request("d2", "web-0"), ("gone", "")))
            assert outcome.message == (
                "volume binding failed (claim_missing): claim ns/gone not found"
            )
            assert kube.volume_writes == [] and kube.bindings == []

    run(body())


def test_a_claim_the_pod_does_not_mount_is_refused_before_anything_is_read() -> None:
    async def body() -> None:
        async with harness(kube=VolumeKube()) as h:
            kube = fake(h)
            stateful_pod(h)
            kube.put_claim(claim_object("ns", "someone-elses"))
            kube.put_pv(pv_object("pv-a"))
            request = with_volumes(bind_request("d1", "web-0"), ("someone-elses", "pv-a"))
            outcome = await decide(h, request)
            assert outcome.result == Outcome.FAILED
            assert outcome.message == (
                "refused by the binder (claim_not_used): pod ns/web-0 does not use claim(s) "
                "ns/someone-elses"
            )
            assert kube.volume_writes == [] and kube.bindings == []
            assert not [path for path in kube.reads if "persistentvolume" in path]

    run(body())


def test_a_write_refused_because_the_pv_changed_is_planned_again_from_a_fresh_read() -> None:
    async def body() -> None:
        async with harness(kube=VolumeKube()) as h:
            kube = fake(h)
            stateful_pod(h)
            kube.put_pv(pv_object("pv-a"))
            kube.volume_script[PV_PATH] = [Scripted(status=409)]
            request = with_volumes(bind_request("d1", "web-0"), ("data-web-0", "pv-a"))
            assert (await decide(h, request)).result == Outcome.BOUND
            assert len(kube.volume_writes) == 2

    run(body())


def test_a_write_that_landed_unheard_is_found_done_on_the_next_read() -> None:
    """A 500 after the PV was written: the retry's resourceVersion is stale (409), so the
    PV is read again, and it already names the claim: nothing more is written."""

    async def body() -> None:
        async with harness(kube=VolumeKube()) as h:
            kube = fake(h)
            stateful_pod(h)
            kube.put_pv(pv_object("pv-a"))
            kube.volume_script[PV_PATH] = [Scripted(status=500, message="apply")]
            request = with_volumes(bind_request("d1", "web-0"), ("data-web-0", "pv-a"))
            outcome = await decide(h, request)
            assert outcome.result == Outcome.BOUND, outcome.message
            assert len(kube.volume_writes) == 2  # the 500, then the retry's 409
            assert kube.timeline[-1] == "binding ns/web-0"

    run(body())


def test_claims_not_bound_before_the_deadline_fail_it_and_keep_the_pv_claimed() -> None:
    """No PV controller: the step gives up before the decision's deadline, leaving the
    Binding its reserve, and writes no Binding. Like kube-scheduler, nothing is rolled
    back: the claimed PV stays claimed, for the PV controller to complete."""

    async def body() -> None:
        async with harness(kube=VolumeKube(controller=False)) as h:
            kube = fake(h)
            stateful_pod(h)
            kube.put_pv(pv_object("pv-a"))
            request = with_volumes(
                bind_request("d1", "web-0", deadline=1.2), ("data-web-0", "pv-a")
            )
            outcome = await decide(h, request)
            assert outcome.result == Outcome.DEADLINE_EXCEEDED
            assert failure(outcome, "timeout"), outcome.message
            assert outcome.message.endswith(": ns/data-web-0")
            assert kube.bindings == []
            assert kube.pvs["pv-a"]["spec"]["claimRef"]["name"] == "data-web-0"
            assert steps(h, "timeout") == 1

    run(body())


def test_a_failed_provisioning_or_a_reset_claim_ref_fails_the_decision() -> None:
    async def body() -> None:
        async with harness(kube=VolumeKube(provisioning_fails=True)) as h:
            kube = fake(h)
            stateful_pod(h)
            outcome = await decide(h, with_volumes(bind_request("d1", "web-0"), ("data-web-0", "")))
            assert outcome.message == (
                "volume binding failed (provisioning_failed): selectedNode annotation reset "
                "for PVC 'data-web-0'"
            )
            kube.controller = False
            kube.put_pv(pv_object("pv-a"))

            async def reset() -> None:
                await eventually(lambda: kube.pvs["pv-a"]["spec"].get("claimRef"))
                del kube.pvs["pv-a"]["spec"]["claimRef"]  # the PV controller unbinds it

            kube.later(reset())
            request = with_volumes(bind_request("d2", "web-0"), ("data-web-0", "pv-a"))
            outcome = await decide(h, request)
            assert outcome.message == (
                "volume binding failed (claimref_reset): ClaimRef got reset for pv 'pv-a'"
            )
            assert kube.bindings == []

    run(body())


def test_a_pod_without_volumes_reads_no_claim_and_no_pv() -> None:
    async def body() -> None:
        async with harness(kube=VolumeKube()) as h:
            add_pod(h, "plain")
            assert (await decide(h, bind_request("d1", "plain"))).result == Outcome.BOUND
            kube = fake(h)
            assert not [path for path in kube.reads if "persistentvolume" in path]
            assert h.metrics.registry.get_sample_value(
                "splitsched_binder_volume_step_duration_seconds_count"
            ) in (None, 0.0)

    run(body())


def test_the_step_leaves_the_binding_its_reserve_before_the_deadline() -> None:
    job: Any = type("Job", (), {"deadline": 100.0})()
    assert volumes.step_deadline(job, now=90.0) == 100.0 - volumes.BINDING_RESERVE
    assert volumes.step_deadline(job, now=99.0) == 99.75  # a quarter of what is left
    assert volumes.step_deadline(job, now=101.0) == 100.0


def test_a_decision_waiting_for_the_pv_controller_is_re_reported_with_its_volumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scheduler that takes over while the step waits learns which volumes the decision
    binds from the IN_PROGRESS re-reports (and from its outcome), so it can hold them."""
    monkeypatch.setattr(worker, "IN_PROGRESS_AFTER", 0.0)

    async def body() -> None:
        async with harness(kube=VolumeKube(controller=False)) as h:
            kube = fake(h)
            stateful_pod(h, "web-0", "data-web-0", "logs-web-0")
            kube.put_pv(pv_object("pv-a"))
            request = with_volumes(
                bind_request("d1", "web-0", deadline=1.5),
                ("data-web-0", "pv-a"), ("logs-web-0", ""),
            )  # fmt: skip
            assert (await h.stub.Bind(request)).accepted
            await eventually(lambda: kube.pvs["pv-a"]["spec"].get("claimRef"))
            (report,) = [o for o in h.pool.in_progress() if o.decision_id == "d1"]
            written = [(v.claim_namespace, v.claim_name, v.pv_name) for v in report.volume_bindings]
            assert written == [("ns", "data-web-0", "pv-a"), ("ns", "logs-web-0", "")]
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.DEADLINE_EXCEEDED
            assert list(outcome.volume_bindings) == list(report.volume_bindings)

    run(body())
