"""The watcher process: `splitsched-watcher` / `python -m services.watcher`.

Wires the list/watch loops (`services.watcher.listwatch`) into the hub
(`services.watcher.ring`) and serves it over gRPC (`services.watcher.server`), with the
health service, /healthz, /readyz and /metrics, through the runtime's service skeleton
(`splitsched.runtime.service`). Ready (gRPC SERVING, /readyz 200) once the initial LIST
of nodes, pods, namespaces and storage is in the view. Its flags and settings:
`services.watcher.settings`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
from collections.abc import Sequence

import aiohttp
from prometheus_client import CollectorRegistry

from services.watcher import entries, listwatch, metrics, ring, server
from services.watcher.settings import WatcherSettings
from splitsched.runtime import grpcsrv, kubeclient, service

log = logging.getLogger("services.watcher")

#: The resources whose initial LIST makes the watcher ready: kube-scheduler waits for its
#: namespace informer too, so no namespaceSelector is judged against a partial view, and a
#: scheduler must not decide before it knows the claims, volumes and CSINode limits a
#: pod's volumes depend on, nor the devices and claims its resource claims depend on (an
#: API server that does not serve resource.k8s.io counts as listed, with none).
REQUIRED = frozenset(
    {"nodes", "pods", "namespaces", *(r.name for r in (*listwatch.STORAGE, *listwatch.DEVICES))}
)


class Watcher:
    """The watcher as the service skeleton drives it: a reflector per resource feeding
    the hub, the hub streamed to schedulers."""

    def __init__(self, settings: WatcherSettings) -> None:
        self.settings = settings
        self.registry = CollectorRegistry()
        self.hub = ring.ClusterHub(ring_size=settings.ring_size)
        self.metrics = metrics.Metrics(self.registry)
        self.metrics.watch_ring(self.hub)
        self.stream = server.WatcherService(self.hub, registry=self.registry)
        self.converter = entries.Converter(scheduler_names=settings.scheduler_names)
        self.tasks: list[asyncio.Task[None]] = []
        self._waiting_for = set(REQUIRED)
        self._background: set[asyncio.Task[None]] = set()
        self._endpoint: kubeclient.KubeEndpoint | None = None
        self._session: aiohttp.ClientSession | None = None
        self._grpc: grpcsrv.GrpcServer | None = None

    @property
    def endpoint(self) -> kubeclient.KubeEndpoint:
        assert self._endpoint is not None, "open() first"
        return self._endpoint

    def resources(self) -> list[listwatch.Resource]:
        resources = [
            listwatch.NODES, listwatch.PODS, listwatch.NAMESPACES, *listwatch.STORAGE,
            *listwatch.DEVICES,
        ]  # fmt: skip
        if self.settings.pdbs:
            resources.append(listwatch.PDBS)
        return resources

    def healthy(self) -> bool:
        """Alive while every reflector runs."""
        return all(not t.done() for t in self.tasks)

    async def open(self) -> service.Exposed:
        self._endpoint = kubeclient.load_endpoint(
            self.settings.common.kubeconfig, context=self.settings.common.kube_context
        )
        self._session = kubeclient.open_session(self._endpoint, limit=0)
        return service.Exposed(
            servicers=[(self.stream.add_to_server, self.stream)],
            service_names=[server.SERVICE_NAME],
            metrics=self.registry,
            ready=lambda: self.hub.synced,
            healthy=self.healthy,
        )

    async def start(self, running: service.Running) -> None:
        assert self._session is not None
        self._grpc = running.grpc
        for res in self.resources():
            reflector = listwatch.Reflector(
                resource=res,
                hub=self.hub,
                converter=self.converter,
                endpoint=self.endpoint,
                session=self._session,
                metrics=self.metrics,
                page_size=self.settings.page_size,
                watch_timeout=self.settings.watch_timeout,
                on_synced=functools.partial(self._on_synced, res.name),
            )
            self.tasks.append(asyncio.create_task(reflector.run(), name=f"reflector-{res.name}"))

    def _on_synced(self, resource: str) -> None:
        """Serve once every required resource has been listed."""
        self._waiting_for.discard(resource)
        if self._waiting_for or self.hub.synced:
            return
        self.hub.mark_synced()
        log.info("initial list complete: %d objects; serving", len(self.hub))
        assert self._grpc is not None
        task = asyncio.get_running_loop().create_task(self._grpc.set_serving(True))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def describe(self, running: service.Running) -> str:
        return (
            f"splitsched-watcher listening grpc={running.grpc_address} "
            f"http={running.http_address} api={self.endpoint.host}"
        )

    async def drain(self) -> None:
        log.info("shutting down")
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    async def close(self) -> int:
        if self._session is not None:
            await self._session.close()
        return 0


async def serve(settings: WatcherSettings) -> int:
    """Run the watcher until SIGTERM/SIGINT; returns the exit code."""
    return await service.serve(Watcher(settings), settings.common)


def main(argv: Sequence[str] | None = None) -> int:
    return service.main("watcher", load=lambda: WatcherSettings.load(argv), serve=serve)


if __name__ == "__main__":
    sys.exit(main())
