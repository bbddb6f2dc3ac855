"""The binder's requests and Events as values: paths, bodies, and what their answers mean."""

from __future__ import annotations

from services.binder import apirequests, classify, events
from services.binder.claims import ClaimRef
from services.binder.events import EventSource
from services.binder.jobs import BindJob, PodKey, VolumeBinding
from splitsched.runtime.kubeclient import Response

POD = PodKey("ns", "web-0", "uid-1")
SOURCE = EventSource(controller="splitsched", binder_id="b-0")
NOW = 1_700_000_000.25


def test_binding_carries_the_uid_precondition_and_the_node() -> None:
    job = BindJob("d1", "ns", "web-0", "uid-1", "node-a", deadline=0.0, max_attempts=5)
    request = apirequests.binding(job)
    assert (request.method, request.path) == ("POST", "/api/v1/namespaces/ns/pods/web-0/binding")
    assert request.body["metadata"] == {"name": "web-0", "namespace": "ns", "uid": "uid-1"}
    assert request.body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node-a"}


def test_names_are_quoted_in_paths() -> None:
    request = apirequests.read_pod("ns", "a b")
    assert request.path == "/api/v1/namespaces/ns/pods/a%20b"


def test_nomination_is_a_uid_checked_merge_patch() -> None:
    request = apirequests.nomination(POD, "node-b")
    assert request.method == "PATCH" and request.content_type == apirequests.MERGE_PATCH
    assert request.path.endswith("/pods/web-0/status")
    assert request.body == {"metadata": {"uid": "uid-1"}, "status": {"nominatedNodeName": "node-b"}}


def test_eviction_has_its_own_answer_meaning() -> None:
    request = apirequests.eviction(POD)
    assert request.body["deleteOptions"] == {"preconditions": {"uid": "uid-1"}}
    assert request.retryable is classify.retryable_eviction


def test_an_events_409_means_written_and_is_not_retried() -> None:
    event = SOURCE.event(events.FAILED_SCHEDULING, POD, "0/3 nodes", now=NOW)
    request = apirequests.create_event(event)
    assert request.path == "/apis/events.k8s.io/v1/namespaces/ns/events"
    assert request.what == "event FailedScheduling for ns/web-0"
    conflict = Response(409, {"message": "exists"})
    assert request.done(conflict) and not request.retryable(conflict)
    assert not apirequests.read_pod("ns", "p").done(conflict)


def test_unschedulable_condition() -> None:
    request = apirequests.unschedulable_condition(POD, reason="Unschedulable", message="m", now=NOW)
    assert request.content_type == apirequests.STRATEGIC_MERGE_PATCH
    (condition,) = request.body["status"]["conditions"]
    assert condition == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "m",
        "lastProbeTime": None,
        "lastTransitionTime": "2023-11-14T22:13:20Z",
    }


def test_one_event_builder_for_every_kind() -> None:
    scheduled = SOURCE.event(events.SCHEDULED, POD, "assigned", now=NOW, profile="gpu")
    assert scheduled["type"] == "Normal" and scheduled["action"] == "Binding"
    assert scheduled["reportingController"] == "gpu"
    assert scheduled["reportingInstance"] == "gpu-b-0"
    assert scheduled["eventTime"] == "2023-11-14T22:13:20.250000Z"
    assert scheduled["regarding"]["uid"] == "uid-1"
    assert "related" not in scheduled
    preempted = SOURCE.event(events.PREEMPTED, POD, "by", now=NOW, related=PodKey("ns", "hi", "u9"))
    assert preempted["reportingController"] == "splitsched"
    assert preempted["related"] == {
        "apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "hi", "uid": "u9"
    }  # fmt: skip


def test_event_limits() -> None:
    nameless = PodKey("ns", "x" * 253, "")
    event = SOURCE.event(events.FAILED_SCHEDULING, nameless, "n" * 5000, now=NOW)
    assert len(event["metadata"]["name"]) <= 253
    assert len(event["note"]) == events.EVENT_NOTE_LIMIT
    assert "uid" not in event["regarding"]
    long_source = EventSource(controller="c" * 200, binder_id="b")
    assert len(long_source.event(events.SCHEDULED, POD, "", now=NOW)["reportingInstance"]) == 128


def test_a_pv_is_claimed_as_kube_scheduler_does_conditional_on_what_was_read() -> None:
    claim = ClaimRef("ns", "data-0", "c-uid", "41")
    request = apirequests.bind_pv("pv-a", resource_version="7", claim=claim,
                                  bound_by_controller=True)  # fmt: skip
    assert (request.method, request.path) == ("PATCH", "/api/v1/persistentvolumes/pv-a")
    assert request.content_type == apirequests.MERGE_PATCH
    assert request.body == {
        "metadata": {"resourceVersion": "7",
                     "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"claimRef": {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "ns",
            "name": "data-0", "uid": "c-uid", "resourceVersion": "41", "fieldPath": None,
        }},
    }  # fmt: skip
    prebound = apirequests.bind_pv("pv-a", resource_version="7", claim=claim,
                                   bound_by_controller=False)  # fmt: skip
    assert prebound.body["metadata"] == {"resourceVersion": "7"}
    # A 409 is the volume step's to judge (read again), never the retry loop's.
    assert not request.retryable(Response(409, {})) and request.retryable(Response(503, {}))


def test_a_claim_is_marked_for_provisioning_on_the_node() -> None:
    volume = VolumeBinding("ns", "data-0")
    request = apirequests.select_node(volume, node="node-a", resource_version="41")
    assert request.path == "/api/v1/namespaces/ns/persistentvolumeclaims/data-0"
    assert request.content_type == apirequests.MERGE_PATCH
    assert request.body == {"metadata": {
        "resourceVersion": "41", "annotations": {"volume.kubernetes.io/selected-node": "node-a"},
    }}  # fmt: skip
    assert apirequests.read_claim(volume).path == request.path
    assert apirequests.read_pv("pv a").path == "/api/v1/persistentvolumes/pv%20a"


def test_the_node_list_is_a_table_from_the_cache_and_its_names_are_the_name_column() -> None:
    request = apirequests.list_node_names()
    assert request.path == "/api/v1/nodes?resourceVersion=0&includeObject=None"
    assert request.accept == apirequests.TABLE
    table = {
        "kind": "Table",
        "columnDefinitions": [{"name": "Status", "format": ""}, {"name": "N", "format": "name"}],
        "rows": [{"cells": ["Ready", "a"]}, {"cells": ["Ready", "b"]}, {"cells": ["short"]}],
    }
    assert apirequests.table_names(table) == ["a", "b"]  # a row without the cell is skipped
    assert apirequests.table_names({"kind": "NodeList", "items": []}) is None
    assert apirequests.table_names({"columnDefinitions": [{"format": ""}], "rows": []}) is None
    assert apirequests.table_names("not json") is None
