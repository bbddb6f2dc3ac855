"""What one delta costs the watcher's ring, in bytes: pods converted as the watcher does
(``services.watcher.entries``), each added and then bound, in a ring that holds every
delta; tracemalloc over the whole, divided by the deltas held. Allocations, not time, so
the figure does not depend on the machine's load.

    python -m bench.ring_memory --pods 10000
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
from dataclasses import dataclass
from typing import Any

from services.watcher import entries, ring

NOW = 1_700_000_000.0


def pod_json(i: int, version: int, node: str = "") -> dict[str, Any]:
    """A Deployment's pod as the API server serves it: labels, an owner, one container
    with requests and a few env values, the default tolerations."""
    return {
        "metadata": {
            "name": f"web-{i}", "namespace": "shop", "uid": f"uid-{i:06d}",
            "resourceVersion": str(version), "creationTimestamp": "2026-11-27T10:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": "web-5d8f7c9b6", "uid": "rs-1", "controller": True}],
        },
        "spec": {
            "schedulerName": "splitsched", "nodeName": node,
            "containers": [{
                "name": "web", "image": "registry.example/web:1.2.3",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "env": [{"name": f"E{j}", "value": "x" * 40} for j in range(8)],
            }],
            "tolerations": [
                {"key": f"node.kubernetes.io/{taint}", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}
                for taint in ("not-ready", "unreachable")
            ],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }  # fmt: skip


@dataclass(frozen=True)
class RingCost:
    deltas: int
    bytes_per_delta: float
    body_bytes: int  # one pod's serialised body, for scale


def measure(pods: int) -> RingCost:
    converter = entries.Converter(scheduler_names=["splitsched"])
    hub = ring.ClusterHub(ring_size=2 * pods, first_sequence=1)
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for node in ("", "n1"):  # added pending, then bound: two deltas a pod
            for i in range(pods):
                entry = converter.pod(pod_json(i, len(hub) + hub.ring_events + 1, node), NOW)
                if entry is None or hub.upsert(entry) is None:
                    raise AssertionError(f"pod {i} made no delta")
        del entry
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    body = hub.get(ring.POD, "shop/web-0")
    assert body is not None
    return RingCost(hub.ring_events, held / hub.ring_events, len(body.body))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=10_000)
    cost = measure(parser.parse_args().pods)
    print(
        f"{cost.deltas} deltas held: {cost.bytes_per_delta:,.0f} bytes a delta "
        f"(a pod's body is {cost.body_bytes} bytes)"
    )


if __name__ == "__main__":
    main()
