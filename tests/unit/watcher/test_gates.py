"""The watcher streams a pending pod's scheduling gates: their names reach the scheduler, the
update that removes one is a MODIFIED delta (never absorbed), and the API server's own
status churn on a gated pod is absorbed like any other."""

from __future__ import annotations

import copy
from typing import Any

from services.watcher import entries, ring
from splitsched import wire
from splitsched.v1 import watcher_pb2

NOW = 1_700_000_000.0


def gated_json(*gates: str, version: str = "1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "train-0",
            "namespace": "shop",
            "uid": "u-train-0",
            "resourceVersion": version,
        },
        "spec": {
            "schedulerName": "splitsched",
            "schedulingGates": [{"name": g} for g in gates],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
            ],
        },
    }


def streamed(entry: ring.Entry | None) -> watcher_pb2.ClusterEvent:
    assert entry is not None
    return watcher_pb2.ClusterEvent.FromString(ring._header(1, ring.ADDED) + entry.body)


def test_the_gate_names_are_streamed() -> None:
    entry = entries.Converter(scheduler_names=["splitsched"]).pod(
        gated_json("example.com/a", "example.com/b"), NOW
    )
    event = streamed(entry)
    assert list(event.pod.scheduling_gates) == ["example.com/a", "example.com/b"]
    pod = wire.pod_from_proto(event.pod)
    assert pod.scheduling_gates == ("example.com/a", "example.com/b")
    assert not pod.invalid_reason


def test_removing_a_gate_is_a_delta_and_status_churn_is_absorbed() -> None:
    conv = entries.Converter(scheduler_names=["splitsched"])
    hub = ring.ClusterHub(ring_size=10, first_sequence=1)
    first = conv.pod(gated_json("example.com/a", "example.com/b"), NOW)
    assert first is not None and hub.upsert(first) == ring.ADDED

    churn = gated_json("example.com/a", "example.com/b", version="2")
    churn["status"]["conditions"][0]["lastProbeTime"] = "2026-01-01T00:00:00Z"
    assert entries.raw_pod_fingerprint(churn) == first.raw_fingerprint
    second = conv.pod(churn, NOW)
    assert second is not None and hub.upsert(second) is None and hub.absorbed == 1

    for version, gates in (("3", ("example.com/b",)), ("4", ())):
        update = gated_json(*gates, version=version)
        assert entries.raw_pod_fingerprint(update) != first.raw_fingerprint
        entry = conv.pod(copy.deepcopy(update), NOW)
        assert entry is not None and hub.upsert(entry) == ring.MODIFIED
        assert tuple(streamed(entry).pod.scheduling_gates) == gates
    assert hub.absorbed == 1
