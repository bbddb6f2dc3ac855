"""What a binder refuses from a trusted caller, as tables (``services.binder.guard``): the
pod's schedulerName, a victim's priority against its preemptor's, a node's read, the
claims a volume step names against those the pod mounts. Also who the caller is
(``services.binder.server.caller_identity``) and which node names and volume bindings a
request may carry."""

from __future__ import annotations

from typing import Any

import pytest

from services.binder import guard
from services.binder.guard import Reason
from services.binder.jobs import FAILED, VolumeBinding
from services.binder.server import (
    caller_identity,
    job_from_request,
    validate_bind,
    validate_preempt,
)
from splitsched.v1 import binder_pb2


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec}


PROFILES = frozenset({"splitsched", "splitsched-binpack"})


@pytest.mark.parametrize(
    ("seen", "refused"),
    [
        (pod(schedulerName="splitsched"), False),
        (pod(schedulerName="splitsched-binpack"), False),
        (pod(schedulerName="default-scheduler"), True),
        (pod(schedulerName="Splitsched"), True),  # names are exact, like kube-scheduler's
        (pod(), True),  # no schedulerName: the API server's default-scheduler owns it
        ({"metadata": {}}, True),
        ({"spec": "not a mapping"}, True),
    ],
)
def test_a_pod_is_refused_unless_its_scheduler_name_is_a_profile_served(
    seen: dict[str, Any], refused: bool
) -> None:
    refusal = guard.foreign_pod(seen, who="pod ns/p", profiles=PROFILES)
    assert (refusal is not None) is refused
    if refusal is not None:
        assert refusal.reason is Reason.SCHEDULER_NAME
        assert refusal.message.startswith("pod ns/p has schedulerName ")
        assert "(splitsched, splitsched-binpack)" in refusal.message


@pytest.mark.parametrize(
    ("victim", "preemptor_priority", "refused"),
    [
        (pod(priority=0), 1000, False),
        (pod(), 1000, False),  # unset: 0
        (pod(priority=-5), 0, False),
        (pod(priority=999), 1000, False),
        (pod(priority=1000), 1000, True),  # equal is not lower
        (pod(priority=2000), 1000, True),
        (pod(), 0, True),
        (pod(priority=True), 1, False),  # not an int: unset
        (pod(priority="2000"), 1, False),
    ],
)
def test_a_victim_is_refused_unless_its_priority_is_lower_than_the_preemptors(
    victim: dict[str, Any], preemptor_priority: int, refused: bool
) -> None:
    refusal = guard.victim_not_lower(
        victim, who="ns/v", preemptor="ns/high", preemptor_priority=preemptor_priority
    )
    assert (refusal is not None) is refused
    if refusal is not None:
        assert refusal.reason is Reason.VICTIM_PRIORITY
        assert f"not lower than preemptor ns/high's {preemptor_priority}" in refusal.message


@pytest.mark.parametrize(("status", "refused"), [(200, False), (404, True), (403, False)])
def test_a_node_is_refused_only_when_reading_it_answers_404(status: int, refused: bool) -> None:
    refusal = guard.missing_node("n1", status=status)
    assert (refusal is not None) is refused


def test_a_refusal_is_a_final_failed_result_that_says_why() -> None:
    refusal = guard.missing_node("n1", status=404)
    assert refusal is not None
    result = refusal.result(attempts=0, status=0)
    assert result.result == FAILED
    assert result.message == "refused by the binder (node_missing): node 'n1' does not exist"


class Context:
    def __init__(self, auth: dict[str, list[bytes]]) -> None:
        self._auth = auth

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth

    def peer(self) -> str:
        return "ipv4:10.0.0.7:4242"


@pytest.mark.parametrize(
    ("auth", "who"),
    [
        ({"x509_common_name": [b"splitsched-scheduler"]}, "splitsched-scheduler"),
        ({"peer_dns": [b"b.example", b"a.example"]}, "a.example, b.example"),
        ({}, "ipv4:10.0.0.7:4242 (no client certificate)"),
    ],
)
def test_the_caller_is_its_certificate_identity_else_its_address(
    auth: dict[str, list[bytes]], who: str
) -> None:
    assert caller_identity(Context(auth)) == who  # type: ignore[arg-type]


def test_a_node_name_that_is_not_a_dns_subdomain_is_an_invalid_request() -> None:
    bind = binder_pb2.BindRequest(decision_id="d", node="../../secrets/x")
    bind.pod.namespace, bind.pod.name, bind.pod.uid = "ns", "p", "u"
    bind.deadline.FromSeconds(2_000_000_000)
    assert validate_bind(bind, now=0) == (
        "invalid request: node '../../secrets/x' is not a valid node name"
    )
    preempt = binder_pb2.PreemptRequest(decision_id="d", node="N/1")
    preempt.preemptor.namespace, preempt.preemptor.name, preempt.preemptor.uid = "ns", "p", "u"
    assert validate_preempt(preempt) == "invalid request: node 'N/1' is not a valid node name"


def pod_with_volumes(*volumes: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web-0", "namespace": "ns"}, "spec": {"volumes": list(volumes)}}


def test_a_volume_step_is_refused_for_a_claim_the_pod_does_not_mount() -> None:
    seen = pod_with_volumes(
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "config", "configMap": {"name": "c"}},
        "not a volume",
    )
    assert guard.pod_claims(seen) == {"data-web-0", "web-0-scratch"}
    ours = [VolumeBinding("ns", "data-web-0", "pv-a"), VolumeBinding("ns", "web-0-scratch")]
    assert guard.unused_claims(seen, ours, who="pod ns/web-0") is None
    theirs = [*ours, VolumeBinding("ns", "db-0", "pv-b"), VolumeBinding("ns", "c")]
    refusal = guard.unused_claims(seen, theirs, who="pod ns/web-0")
    assert refusal is not None and refusal.reason is Reason.CLAIM_NOT_USED
    assert refusal.message == "pod ns/web-0 does not use claim(s) ns/c, ns/db-0"
    assert guard.pod_claims({"spec": {"volumes": "x"}}) == set()


def bind_with_volumes(*bindings: tuple[str, str, str]) -> binder_pb2.BindRequest:
    bind = binder_pb2.BindRequest(decision_id="d", node="node-a")
    bind.pod.namespace, bind.pod.name, bind.pod.uid = "ns", "p", "u"
    bind.deadline.FromSeconds(2_000_000_000)
    for namespace, claim, pv in bindings:
        bind.volume_bindings.add(claim_namespace=namespace, claim_name=claim, pv_name=pv)
    return bind


@pytest.mark.parametrize(
    ("bindings", "problem"),
    [
        ([("ns", "data", "pv-a"), ("", "logs", "")], None),
        ([("other", "data", "pv-a")],
         "volume_bindings[0].claim_namespace 'other' is not the pod's"),
        ([("ns", "", "pv-a")], "volume_bindings[0].claim_name '' is not a valid claim name"),
        ([("ns", "../x", "")], "volume_bindings[0].claim_name '../x' is not a valid claim name"),
        ([("ns", "d", "PV/1")], "volume_bindings[0].pv_name 'PV/1' is not a valid PV name"),
        ([("ns", "d", "pv-a"), ("ns", "d", "pv-b")],
         "volume_bindings[1] names a claim or PV an earlier entry names"),
        ([("ns", "d", "pv-a"), ("ns", "e", "pv-a")],
         "volume_bindings[1] names a claim or PV an earlier entry names"),
        ([("ns", f"c{i}", "") for i in range(257)], "257 volume_bindings (at most 256)"),
    ],
)  # fmt: skip
def test_volume_bindings_name_claims_of_the_pods_namespace_and_pvs_once_each(
    bindings: list[tuple[str, str, str]], problem: str | None
) -> None:
    expected = None if problem is None else f"invalid request: {problem}"
    assert validate_bind(bind_with_volumes(*bindings), now=0) == expected


def test_the_job_carries_the_volume_bindings_in_the_pods_namespace() -> None:
    job = job_from_request(bind_with_volumes(("", "data", "pv-a"), ("ns", "logs", "")))
    assert job.volumes == (VolumeBinding("ns", "data", "pv-a"), VolumeBinding("ns", "logs", ""))
    assert job_from_request(bind_with_volumes()).volumes == ()
