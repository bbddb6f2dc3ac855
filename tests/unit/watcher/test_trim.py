"""The watcher's stream carries only what scheduling reads (issue 17 item 5).

A pod holding env, command, args, volumes, pull secrets and secret-looking annotations
goes through the watcher's conversion, and none of their values is in the event bytes,
while what the plugins read (labels, requests, the gang) is. The documented field list
(docs/api.md, "What the watcher streams") is checked against the messages, so a field
added to the stream without a word on why fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor

from services.watcher import entries, ring
from splitsched import wire
from splitsched.v1 import types_pb2, watcher_pb2
from tests.support.builders import (
    LEAKY_IMAGE,
    SECRET_MARKER,
    ZONE,
    leaky_node_json,
    leaky_pod_json,
)

NOW = 1_700_000_000.0
MARKER = SECRET_MARKER.encode()
GANG = {"splitsched.io/group": "trio", "splitsched.io/min-member": "3"}
DOCS = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def event_of(entry: ring.Entry | None) -> watcher_pb2.ClusterEvent:
    assert entry is not None
    return watcher_pb2.ClusterEvent.FromString(ring._header(1, ring.ADDED) + entry.body)


def test_the_leaky_fixtures_hold_the_marker_everywhere_it_must_not_go() -> None:
    """The other tests prove something only if the input is full of the marker."""
    pod = json.dumps(leaky_pod_json())
    for what in ("env-value", "ref", "env-from", "command", "args", "pull",
                 "volume", "config-map", "host-path", "mount", "probe", "account", "manager",
                 "vault-token", "api-key", "applied", "init", "i\""):  # fmt: skip
        assert f"{SECRET_MARKER}-{what}" in pod, what
    assert json.dumps(leaky_node_json()).count(SECRET_MARKER) == 4


def test_a_pod_streams_none_of_its_env_command_volumes_or_other_annotations() -> None:
    entry = entries.Converter(scheduler_names=["splitsched"]).pod(leaky_pod_json(), NOW)
    event = event_of(entry)
    assert entry is not None
    assert MARKER not in entry.body
    assert MARKER not in event.SerializeToString()
    # What the plugins read is all there.
    pod = wire.pod_from_proto(event.pod)
    assert (pod.key, pod.uid, pod.scheduler_name) == ("ns/leaky", "uid-leaky", "splitsched")
    assert dict(pod.labels) == {"app": "web"}
    assert dict(pod.annotations) == GANG
    assert pod.group is not None and (pod.group.name, pod.group.min_member) == ("trio", 3)
    assert [c.name for c in pod.containers] == ["app"]
    assert [c.image for c in pod.containers] == [LEAKY_IMAGE]
    assert pod.requests == {"cpu": 250}
    assert not pod.invalid_reason


def test_a_placed_pod_streams_no_image_and_an_image_change_is_absorbed() -> None:
    """ImageLocality reads the images of the pod being placed only: once placed, a pod's
    images (which `kubectl set image` changes in place) stay off the stream."""
    conv = entries.Converter()
    hub = ring.ClusterHub(ring_size=10, first_sequence=1)
    placed = leaky_pod_json()
    placed["spec"]["nodeName"] = "n1"
    placed["spec"]["volumes"].append({"name": "model", "image": {"reference": "models/m:2"}})
    first = conv.pod(placed, NOW)
    assert first is not None and hub.upsert(first) == ring.ADDED
    streamed = event_of(first).pod
    assert [c.image for c in streamed.containers] == [""] and not streamed.image_volumes
    placed["metadata"]["resourceVersion"] = "8"
    placed["spec"]["containers"][0]["image"] = "registry.example/app:2"
    second = conv.pod(placed, NOW)
    assert second is not None and hub.upsert(second) is None and hub.absorbed == 1


def test_a_node_streams_its_labels_and_none_of_its_annotations() -> None:
    entry = entries.Converter().node(leaky_node_json(), NOW)
    event = event_of(entry)
    assert entry is not None
    assert MARKER not in entry.body
    assert dict(event.node.labels) == {ZONE: "a"}
    assert not event.node.annotations
    assert dict(event.node.allocatable) == {"cpu": 2000, "pods": 110}


@pytest.mark.parametrize(
    ("annotations", "streamed"),
    [
        ({}, {}),
        ({"example.com/token": "t"}, {}),
        ({"kubectl.kubernetes.io/last-applied-configuration": "{}"}, {}),
        ({"splitsched.io/group": "g", "example.com/token": "t"}, {"splitsched.io/group": "g"}),
        (
            {"splitsched.io/min-member": "2", "scheduling.x-k8s.io/min-member": "3"},
            {"splitsched.io/min-member": "2", "scheduling.x-k8s.io/min-member": "3"},
        ),
        ({"splitsched.io/group-other": "x", "Splitsched.io/group": "y"}, {}),
    ],
)
def test_only_the_pod_group_annotations_are_streamed(
    annotations: dict[str, str], streamed: dict[str, str]
) -> None:
    kept = dict(annotations)
    entries.keep_streamed_annotations(kept)
    assert kept == streamed
    msg = types_pb2.Pod(annotations=annotations)
    entries.keep_streamed_annotations(msg.annotations)
    assert dict(msg.annotations) == streamed


def test_an_update_of_dropped_annotations_only_is_absorbed() -> None:
    """The fingerprint is taken after trimming: a tool rewriting its annotation costs the
    scheduler nothing."""
    conv = entries.Converter()
    hub = ring.ClusterHub(ring_size=10, first_sequence=1)
    first = conv.pod(leaky_pod_json(), NOW)
    assert first is not None and hub.upsert(first) == ring.ADDED
    changed = leaky_pod_json()
    changed["metadata"]["resourceVersion"] = "8"
    changed["metadata"]["annotations"]["example.com/api-key"] = "rotated"
    second = conv.pod(changed, NOW)
    assert second is not None and second.fingerprint == first.fingerprint
    assert hub.upsert(second) is None and hub.absorbed == 1
    changed["metadata"]["resourceVersion"] = "9"
    changed["metadata"]["labels"]["app"] = "api"  # what a selector sees: streamed
    third = conv.pod(changed, NOW)
    assert third is not None and hub.upsert(third) == ring.MODIFIED


def _streamed_section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("\n## What the watcher streams\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def _documented(message: str) -> str:
    """The part of the section about one message: from its bold name to the next."""
    section = _streamed_section()
    start = section.index(f"\n**{message}**")
    end = section.find("\n**", start + 1)
    return section[start : end if end > 0 else len(section)]


@pytest.mark.parametrize(
    "message",
    [
        types_pb2.Pod.DESCRIPTOR,
        types_pb2.Node.DESCRIPTOR,
        types_pb2.PodDisruptionBudget.DESCRIPTOR,
        types_pb2.Namespace.DESCRIPTOR,
        types_pb2.PersistentVolumeClaim.DESCRIPTOR,
        types_pb2.PersistentVolume.DESCRIPTOR,
        types_pb2.StorageClass.DESCRIPTOR,
        types_pb2.CSINode.DESCRIPTOR,
        watcher_pb2.ClusterEvent.DESCRIPTOR,
    ],
    ids=lambda d: d.name,
)
def test_every_streamed_field_is_documented(message: Descriptor) -> None:
    section = _documented(message.name)
    missing = [f.name for f in message.fields if f"`{f.name}`" not in section]
    assert not missing, f"{message.name} fields not in docs/api.md: {missing}"


def test_the_documented_annotations_are_the_streamed_ones() -> None:
    section = _streamed_section()
    for key in entries.STREAMED_ANNOTATIONS:
        assert f"`{key}`" in section
