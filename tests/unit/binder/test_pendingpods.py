"""The pending pods' store (``services.binder.pendingpods.PendingPods``): fed watch events,
it shows a pod with exactly what the guard reads of it, by namespace, name and uid."""

from __future__ import annotations

from typing import Any

import pytest

from services.binder import guard
from services.binder.pendingpods import Gone, PendingPods, kept
from splitsched.runtime.kubeclient import ApiError


def pod(name: str, *, uid: str = "", rv: str = "1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": uid or f"uid-{name}",
                     "resourceVersion": rv, "labels": {"app": "x"}},
        "spec": {"schedulerName": "splitsched", "containers": [{"name": "c"}], **spec},
        "status": {"phase": "Pending"},
    }  # fmt: skip


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def test_an_added_pod_is_shown_by_name_and_uid_and_a_deleted_one_is_not() -> None:
    pods = PendingPods()
    assert pods.handle(event("ADDED", pod("a", rv="7"))) == "7"
    assert pods.get("ns", "a", "uid-a") is not None
    assert pods.get("ns", "a", "") is not None  # a report may name no uid
    assert pods.get("ns", "a", "uid-other") is None  # re-created: read it
    assert pods.get("other", "a", "uid-a") is None
    assert pods.handle(event("DELETED", pod("a", rv="9"))) == "9"
    assert pods.get("ns", "a", "uid-a") is None
    assert len(pods) == 0


def test_a_deletion_of_an_older_pod_of_the_same_name_keeps_the_new_one() -> None:
    pods = PendingPods()
    pods.handle(event("ADDED", pod("a", uid="new")))
    pods.handle(event("DELETED", pod("a", uid="old")))
    assert pods.get("ns", "a", "new") is not None


def test_what_is_kept_is_what_the_guard_reads_and_it_judges_alike() -> None:
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "c1"}}
    scratch = {"name": "tmp", "emptyDir": {}}
    ephemeral = {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    full = pod("a", priority=7, volumes=[claim, scratch, ephemeral])
    small = kept(full)
    assert small["spec"]["volumes"] == [claim, ephemeral]
    assert "containers" not in small["spec"] and "status" not in small
    assert guard.priority(small) == guard.priority(full) == 7
    assert guard.pod_claims(small) == guard.pod_claims(full) == {"c1", "a-eph"}
    assert guard.scheduler_name(small) == "splitsched"
    other = kept(pod("b", schedulerName="default-scheduler"))
    assert guard.foreign_pod(other, who="b", profiles={"splitsched"}) is not None


def test_a_bookmark_moves_the_version_and_changes_nothing() -> None:
    pods = PendingPods()
    pods.handle(event("ADDED", pod("a")))
    assert (
        pods.handle({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}}) == "42"
    )
    assert len(pods) == 1


def test_error_events_raise_gone_for_410_and_api_error_otherwise() -> None:
    pods = PendingPods()
    with pytest.raises(Gone):
        pods.handle({"type": "ERROR", "object": {"code": 410, "message": "too old"}})
    with pytest.raises(ApiError) as raised:
        pods.handle({"type": "ERROR", "object": {"code": 500, "message": "boom"}})
    assert raised.value.status == 500 and "boom" in str(raised.value)


def test_past_the_limit_the_oldest_pod_is_forgotten() -> None:
    pods = PendingPods(max_pods=2)
    for name in ("a", "b", "c"):
        pods.handle(event("ADDED", pod(name)))
    assert pods.get("ns", "a", "") is None
    assert pods.get("ns", "b", "") is not None and pods.get("ns", "c", "") is not None


def test_a_profile_started_over_is_forgotten_and_others_are_kept() -> None:
    pods = PendingPods()
    pods.handle(event("ADDED", pod("a")))
    pods.handle(event("ADDED", pod("b", schedulerName="binpack")))
    pods.forget_profile("splitsched")
    assert pods.get("ns", "a", "") is None
    assert pods.get("ns", "b", "") is not None


def test_malformed_events_change_nothing() -> None:
    pods = PendingPods()
    assert pods.handle({"type": "ADDED", "object": "not an object"}) == ""
    assert pods.handle({"type": "ADDED", "object": {"metadata": {"name": "x"}}}) == ""
    assert pods.handle({"type": "WHATEVER", "object": pod("a", rv="5")}) == "5"
    assert len(pods) == 0
