"""A gated pod through the whole scheduler service: the real `SchedulerService` (watch
ingest, scheduling loop, binder dispatch, Scheduler API) subscribed to an in-process
watcher stream the test fills with the watcher's own conversion of API JSON, and a binder
that records what it is sent. While the pod is gated nothing reaches the binder (no
BindBatch, no FailedScheduling report), and the API shows it GATED with its gates; the
MODIFIED delta that removes the last gate gets it bound like any pod.

The state machine's side: tests/unit/scheduler/test_gates.py."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import grpc
import prometheus_client

from services.scheduler import main as scheduler_main
from services.scheduler.settings import SchedulerSettings
from services.watcher import entries, ring
from splitsched.runtime import service
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.support import watcher
from tests.support.binder import eventually
from tests.support.scheduler import RecordingBinder, free_port, recording_binder

NOW = 1_700_000_000.0
CONVERT = entries.Converter(scheduler_names=["splitsched"])
GATES = ["example.com/quota", "example.com/image"]


def node_json(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def pod_json(name: str, version: str, gates: list[str], *, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name, "namespace": "shop", "uid": f"uid-{name}", "resourceVersion": version,
        },
        "spec": {
            "schedulerName": "splitsched",
            "schedulingGates": [{"name": g} for g in gates],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Pending"},
    }  # fmt: skip


def entry(made: ring.Entry | None) -> ring.Entry:
    assert made is not None
    return made


async def scenario(
    svc: scheduler_main.SchedulerService,
    hub: ring.ClusterHub,
    binder: RecordingBinder,
    api: scheduler_pb2_grpc.SchedulerAsyncStub,
) -> None:
    # The ungated pod binds: the whole path works, so the gated one's silence means something.
    await eventually(lambda: len(binder.requests) == 1)
    assert binder.requests[0].pod.name == "web"
    await asyncio.sleep(0.5)  # several loop turns: nothing else is sent
    assert len(binder.requests) == 1 and not binder.reports and not binder.preempts

    status = await api.GetPod(scheduler_pb2.GetPodRequest(namespace="shop", name="train"))
    assert status.state == scheduler_pb2.GATED and status.queue == "gated"
    assert status.scheduling_attempts == 0 and status.node == ""
    assert status.message == "waiting for its scheduling gates: " + ", ".join(GATES)
    listed = await api.ListPods(scheduler_pb2.ListPodsRequest(state=scheduler_pb2.GATED))
    assert [p.pod.name for p in listed.pods] == ["train"]
    why = await api.Explain(scheduler_pb2.ExplainRequest(namespace="shop", name="train"))
    assert why.state == scheduler_pb2.GATED and why.summary == status.message
    assert not why.plugins and why.feasible_nodes == 0
    assert 'scheduler_pending_pods{queue="gated"} 1.0' in metrics_text(svc)

    hub.upsert(entry(CONVERT.pod(pod_json("train", "3", GATES[1:]), NOW)))  # one gate left
    await eventually(lambda: version_of(svc, "train") == "3")
    await asyncio.sleep(0.3)
    assert len(binder.requests) == 1
    status = await api.GetPod(scheduler_pb2.GetPodRequest(namespace="shop", name="train"))
    assert status.state == scheduler_pb2.GATED and status.message.endswith(": " + GATES[1])

    hub.upsert(entry(CONVERT.pod(pod_json("train", "4", []), NOW)))  # the last gate removed
    await eventually(lambda: len(binder.requests) == 2)
    request = binder.requests[1]
    assert (request.pod.name, request.node) == ("train", "n1")
    status = await api.GetPod(scheduler_pb2.GetPodRequest(namespace="shop", name="train"))
    assert status.state == scheduler_pb2.BINDING and status.scheduling_attempts == 1
    assert not binder.reports and not binder.preempts


def metrics_text(svc: scheduler_main.SchedulerService) -> str:
    return prometheus_client.generate_latest(svc.metrics.registry).decode()


def version_of(svc: scheduler_main.SchedulerService, name: str) -> str:
    rec = svc.state.find("shop", name)
    return rec.pod.resource_version if rec is not None else ""


def test_a_gated_pod_reaches_no_binder_until_its_last_gate_is_removed() -> None:
    async def body() -> None:
        hub = ring.ClusterHub(ring_size=100, first_sequence=1)
        hub.upsert(entry(CONVERT.node(node_json("n1"), NOW)))
        hub.upsert(entry(CONVERT.pod(pod_json("train", "2", GATES), NOW)))
        hub.upsert(entry(CONVERT.pod(pod_json("web", "2", [], cpu="500m"), NOW)))
        hub.mark_synced()
        async with (
            recording_binder() as (binder, binder_port),
            watcher.serving(hub) as watcher_port,
        ):
            listen = f"127.0.0.1:{free_port()}"
            settings = SchedulerSettings.load(
                [
                    "--listen", listen, "--http-listen", "127.0.0.1:0",
                    "--watcher", f"127.0.0.1:{watcher_port}",
                    "--binders", f"127.0.0.1:{binder_port}", "--settle-seconds", "0",
                ],
                environ={},
            )  # fmt: skip
            svc = scheduler_main.SchedulerService(settings)
            served = asyncio.create_task(service.serve(svc, settings.common))
            try:
                await eventually(lambda: svc.state.synced)
                async with grpc.aio.insecure_channel(listen) as channel:
                    await scenario(svc, hub, binder, scheduler_pb2_grpc.SchedulerStub(channel))
            finally:
                # SIGTERM, as Kubernetes stops it (the skeleton handles it: never the default).
                assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
                os.kill(os.getpid(), signal.SIGTERM)
                assert await asyncio.wait_for(served, 20) == 0

    asyncio.run(asyncio.wait_for(body(), 60))
