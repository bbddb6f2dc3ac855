"""Namespaces on the watcher's stream (issue 18): name and labels only, keyed by name, and
an update that changes neither is absorbed.

Drives the Reflector's pure step (`handle_event`) with watch events, no API server.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.watcher import entries, listwatch, metrics, ring
from splitsched.runtime import kubeclient
from splitsched.v1 import watcher_pb2

NOW = 1_700_000_000.0


def reflector(hub: ring.ClusterHub) -> listwatch.Reflector:
    return listwatch.Reflector(
        resource=listwatch.NAMESPACES,
        hub=hub,
        converter=entries.Converter(),
        endpoint=kubeclient.KubeEndpoint(host="http://127.0.0.1:1", auth_header=lambda: ""),
        session=None,  # type: ignore[arg-type]  # handle_event does no I/O
        metrics=metrics.Metrics(None),
    )


def namespace(rv: int, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "team-a", "uid": "u-team-a", "resourceVersion": str(rv), **meta},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def streamed(hub: ring.ClusterHub) -> watcher_pb2.ClusterEvent:
    entry = hub.get(ring.NAMESPACE, "team-a")
    assert entry is not None
    return watcher_pb2.ClusterEvent.FromString(entry.body)


def test_a_namespace_streams_its_name_and_labels_keyed_by_name() -> None:
    hub = ring.ClusterHub(ring_size=10, first_sequence=1)
    r = reflector(hub)
    r.handle_event({"type": "ADDED", "object": namespace(1, labels={"team": "a"})})
    event = streamed(hub)
    assert event.WhichOneof("object") == "namespace"
    assert (event.namespace.name, dict(event.namespace.labels)) == ("team-a", {"team": "a"})
    assert event.resource_version == "1"
    assert hub.keys(ring.NAMESPACE) == ["team-a"]
    assert r.resource_version == "1"


def test_only_a_label_change_is_news() -> None:
    hub = ring.ClusterHub(ring_size=10, first_sequence=1)
    r = reflector(hub)
    r.handle_event({"type": "ADDED", "object": namespace(1, labels={"team": "a"})})
    mark = hub.last_sequence
    annotated = namespace(2, labels={"team": "a"}, annotations={"owner": "x"})
    r.handle_event({"type": "MODIFIED", "object": annotated})
    assert hub.last_sequence == mark and hub.absorbed == 1
    r.handle_event({"type": "MODIFIED", "object": namespace(3, labels={"team": "b"})})
    events = hub.read_after(mark, limit=5)
    assert events is not None and [e.type for e in events] == [ring.MODIFIED]
    assert dict(streamed(hub).namespace.labels) == {"team": "b"}
    r.handle_event({"type": "DELETED", "object": namespace(4, labels={"team": "b"})})
    assert hub.get(ring.NAMESPACE, "team-a") is None
    assert hub.read_after(mark, limit=5)[-1].type == ring.DELETED  # type: ignore[index]


@pytest.mark.parametrize(
    "obj",
    [
        {"metadata": {"uid": "u"}},
        {"metadata": {"name": "x", "labels": {"team": 1}}},
        {"metadata": {"name": "x", "labels": ["team"]}},
    ],
)
def test_a_namespace_that_cannot_be_read_is_skipped_with_a_log(
    obj: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    assert entries.Converter().namespace(obj, NOW) is None
    assert "Namespace" in caplog.text
