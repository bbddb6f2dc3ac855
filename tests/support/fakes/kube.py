"""A fake kube-apiserver for the binder's tests: an aiohttp application answering the calls
the binder makes the way the real API server does, with scripted answers where a test needs
a fault.

`FakeKube` serves the Binding subresource (201; 409 for a pod already assigned or another
uid; 404 for a pod that is gone; or a scripted status, Retry-After, connection reset or
held answer), GET of a pod (with its schedulerName and priority) and of a node (every
node exists but ``missing_nodes``), the pods/status PATCH and Events. `PreemptKube` adds
what a preemption touches: the merge PATCH of pods/status (404 gone, 422 for another
``metadata.uid``) and the Eviction subresource (404 gone, 409 uid precondition failed, 429
with a ``DisruptionBudget`` cause when a PodDisruptionBudget allows no disruption, else the
pod is deleted), both scriptable too. Tests serve ``app()`` on a loopback port and read what
was written from the lists the fakes keep.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


@dataclass
class FakePod:
    uid: str
    node: str = ""
    deleting: bool = False
    scheduler_name: str = "splitsched"
    priority: int | None = None  # spec.priority (None: unset)
    volumes: list[dict[str, Any]] = field(default_factory=list)  # spec.volumes


@dataclass
class Scripted:
    """One scripted answer of the Binding endpoint: an HTTP status or a connection reset."""

    status: int = 201
    retry_after: str | None = None
    reset: bool = False
    message: str = ""
    hold: asyncio.Event | None = None  # wait for this before answering


@dataclass
class FakeKube:
    """The parts of kube-apiserver the binder uses, with a scriptable Binding endpoint."""

    pods: dict[tuple[str, str], FakePod] = field(default_factory=dict)
    script: dict[tuple[str, str], list[Scripted]] = field(default_factory=dict)
    bindings: list[tuple[float, str, str, dict[str, Any]]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    patches: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    hold_all: asyncio.Event | None = None
    holds: list[asyncio.Event] = field(default_factory=list)
    #: Node names a GET answers 404 for (every other node exists).
    missing_nodes: set[str] = field(default_factory=set)
    #: Node names a watch-cache GET (``resourceVersion=0``) answers 404 for while a read
    #: from etcd finds them: a cache that lags a node's creation.
    uncached_nodes: set[str] = field(default_factory=set)
    #: The node names a LIST of nodes answers; None: the list is forbidden (403), as for
    #: a binder without ``list`` on nodes.
    node_list: list[str] | None = None
    #: The Accept header of every LIST of nodes.
    node_lists: list[str] = field(default_factory=list)
    #: The paths of every GET of a pod or a node, in arrival order.
    reads: list[str] = field(default_factory=list)
    #: The same GETs with their query strings (``?resourceVersion=0``: from the cache).
    read_queries: list[str] = field(default_factory=list)
    #: When set, a pod GET is answered only once this is set (after it is in `reads`).
    hold_pod_reads: asyncio.Event | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", self._bind)
        app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}", self._get_pod)
        app.router.add_get("/api/v1/nodes/{name}", self._get_node)
        app.router.add_get("/api/v1/nodes", self._list_nodes)
        app.router.add_patch("/api/v1/namespaces/{ns}/pods/{name}/status", self._patch_status)
        app.router.add_post("/apis/events.k8s.io/v1/namespaces/{ns}/events", self._event)
        app.router.add_get("/readyz", self._readyz)
        return app

    @staticmethod
    def _status(code: int, message: str, **extra: Any) -> web.Response:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                "code": code}  # fmt: skip
        return web.json_response(body, status=code, **extra)

    async def _readyz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _bind(self, request: web.Request) -> web.StreamResponse:
        ns, name = request.match_info["ns"], request.match_info["name"]
        body = await request.json()
        self.bindings.append((time.monotonic(), ns, name, body))
        if self.hold_all is not None:
            await self.hold_all.wait()
        queue = self.script.get((ns, name))
        if queue:
            step = queue.pop(0)
            if step.hold is not None:
                self.holds.append(step.hold)
                await step.hold.wait()
            if step.reset:
                assert request.transport is not None
                request.transport.abort()
                return web.Response(status=500)
            if step.status != 0:
                headers = {"Retry-After": step.retry_after} if step.retry_after else None
                if step.status == 201:
                    self._assign(ns, name, body)
                    return web.json_response({"kind": "Status", "status": "Success"}, status=201)
                return self._status(step.status, step.message or f"scripted {step.status}",
                                    headers=headers)  # fmt: skip
        pod = self.pods.get((ns, name))
        if pod is None:
            return self._status(404, f'pods "{name}" not found')
        uid = body["metadata"].get("uid")
        if uid and uid != pod.uid:
            return self._status(
                409, f"Operation cannot be fulfilled on pods/binding \"{name}\": "
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod.uid}",
            )  # fmt: skip
        if pod.node:
            return self._status(409, f'pod {name} is already assigned to node "{pod.node}"')
        self._assign(ns, name, body)
        return web.json_response({"kind": "Status", "status": "Success", "code": 201}, status=201)

    def _assign(self, ns: str, name: str, body: dict[str, Any]) -> None:
        pod = self.pods.get((ns, name))
        if pod is not None:
            pod.node = body["target"]["name"]

    async def _get_pod(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        self.reads.append(request.path)
        self.read_queries.append(request.path_qs)
        if self.hold_pod_reads is not None:
            await self.hold_pod_reads.wait()
        pod = self.pods.get((ns, name))
        if pod is None:
            return self._status(404, f'pods "{name}" not found')
        meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": pod.uid}
        if pod.deleting:
            meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
        spec: dict[str, Any] = {"nodeName": pod.node, "schedulerName": pod.scheduler_name}
        if pod.priority is not None:
            spec["priority"] = pod.priority
        if pod.volumes:
            spec["volumes"] = pod.volumes
        return web.json_response({"kind": "Pod", "apiVersion": "v1", "metadata": meta,
                                  "spec": spec})  # fmt: skip

    async def _get_node(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.reads.append(request.path)
        self.read_queries.append(request.path_qs)
        from_cache = request.query.get("resourceVersion") == "0"
        if name in self.missing_nodes or (from_cache and name in self.uncached_nodes):
            return self._status(404, f'nodes "{name}" not found')
        return web.json_response({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}})

    async def _list_nodes(self, request: web.Request) -> web.Response:
        self.node_lists.append(request.headers.get("Accept", ""))
        if self.node_list is None:
            return self._status(403, 'nodes is forbidden: cannot list resource "nodes"')
        columns = [{"name": "Name", "type": "string", "format": "name"},
                   {"name": "Status", "type": "string", "format": ""}]  # fmt: skip
        rows = [{"cells": [name, "Ready"], "object": None} for name in self.node_list]
        return web.json_response({"kind": "Table", "columnDefinitions": columns, "rows": rows})

    async def _patch_status(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        self.patches.append((ns, name, request.content_type, await request.json()))
        return web.json_response({"kind": "Pod"})

    async def _event(self, request: web.Request) -> web.Response:
        event = await request.json()
        self.events.append(event)
        return web.json_response(event, status=201)

    def binding_count(self, name: str) -> int:
        return sum(1 for _, _, n, _ in self.bindings if n == name)


@dataclass
class PreemptKube(FakeKube):
    """``FakeKube`` plus pods/status merge patches and the Eviction API."""

    #: Pods a PodDisruptionBudget with no disruptions allowed protects -> the PDB's name.
    pdbs: dict[tuple[str, str], str] = field(default_factory=dict)
    evict_script: dict[tuple[str, str], list[Scripted]] = field(default_factory=dict)
    patch_script: dict[tuple[str, str], list[Scripted]] = field(default_factory=dict)
    evictions: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    nominated: dict[tuple[str, str], str] = field(default_factory=dict)
    #: Every write in arrival order: ("patch" | "evict", namespace, name).
    writes: list[tuple[str, str, str]] = field(default_factory=list)

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", self._evict)
        return app

    async def _scripted(
        self, request: web.Request, queue: list[Scripted] | None
    ) -> web.Response | None:
        """The scripted answer, or None to answer like the real API (2xx steps, no step)."""
        if not queue:
            return None
        step = queue.pop(0)
        if step.hold is not None:
            self.holds.append(step.hold)
            await step.hold.wait()
        if step.reset:
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        if 200 <= step.status < 300:
            return None
        headers = {"Retry-After": step.retry_after} if step.retry_after else None
        return self._status(step.status, step.message or f"scripted {step.status}",
                            headers=headers)  # fmt: skip

    async def _patch_status(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        patch = await request.json()
        self.patches.append((ns, name, request.content_type, patch))
        self.writes.append(("patch", ns, name))
        scripted = await self._scripted(request, self.patch_script.get((ns, name)))
        if scripted is not None:
            return scripted
        pod = self.pods.get((ns, name))
        if pod is None:
            return self._status(404, f'pods "{name}" not found')
        uid = (patch.get("metadata") or {}).get("uid")
        if uid and uid != pod.uid:
            body = {
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422,
                "reason": "Invalid",
                "message": f'Pod "{name}" is invalid: metadata.uid: Invalid value: "{uid}": '
                "field is immutable",
                "details": {"name": name, "kind": "Pod", "causes": [
                    {"reason": "FieldValueInvalid", "field": "metadata.uid",
                     "message": f'Invalid value: "{uid}": field is immutable'},
                ]},
            }  # fmt: skip
            return web.json_response(body, status=422)
        nominated = (patch.get("status") or {}).get("nominatedNodeName")
        if nominated is not None:
            self.nominated[(ns, name)] = nominated
        meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": pod.uid}
        if pod.deleting:
            meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
        return web.json_response(
            {"kind": "Pod", "apiVersion": "v1", "metadata": meta,
             "spec": {"nodeName": pod.node},
             "status": {"nominatedNodeName": self.nominated.get((ns, name), "")}}
        )  # fmt: skip

    async def _evict(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        body = await request.json()
        self.evictions.append((ns, name, body))
        self.writes.append(("evict", ns, name))
        scripted = await self._scripted(request, self.evict_script.get((ns, name)))
        if scripted is not None:
            return scripted
        pod = self.pods.get((ns, name))
        if pod is None:
            return self._status(404, f'pods "{name}" not found')
        uid = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if uid and uid != pod.uid:
            return self._status(
                409, f'Operation cannot be fulfilled on Pod "{name}": the UID in the '
                f"precondition ({uid}) does not match the UID in record ({pod.uid}). The "
                "object might have been deleted and then recreated",
            )  # fmt: skip
        pdb = self.pdbs.get((ns, name))
        if pdb is not None:
            refusal = {
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
                "reason": "TooManyRequests", "message": PDB_MESSAGE,
                "details": {"causes": [{
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {pdb} needs 1 healthy pods and has 1 "
                    "currently",
                }]},
            }  # fmt: skip
            return web.json_response(refusal, status=429)
        del self.pods[(ns, name)]
        return web.json_response({"kind": "Status", "status": "Success", "code": 201}, status=201)

    def evicted_names(self) -> list[str]:
        return [name for _, name, _ in self.evictions]


@contextlib.asynccontextmanager
async def serving(kube: FakeKube) -> AsyncIterator[str]:
    """``kube`` served on a free loopback port for the block: yields its base URL."""
    async with serving_app(kube.app()) as url:
        yield url


@contextlib.asynccontextmanager
async def serving_app(app: web.Application) -> AsyncIterator[str]:
    """``app`` served on a free loopback port for the block (an answer still streaming is
    given a second at the end): yields its base URL."""
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
