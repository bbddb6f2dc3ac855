"""The benchmark's own data path to kube-apiserver: fast pod creation and a bind watch.

Called by ``bench.sidebyside.runner``. The official client's model classes cost about a
millisecond per object, which at hundreds of pods/s would make the harness a contender for
the same two cores, so this speaks plain JSON over one ``aiohttp`` session (admin client
certificate): POST pods with bounded concurrency, and one watch per namespace that records,
for each pod, the monotonic time the harness first saw ``spec.nodeName`` set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
import orjson

log = logging.getLogger("bench.sidebyside")

Manifest = dict[str, Any]


class ApiError(RuntimeError):
    """kube-apiserver answered with an unexpected status."""


class KubeIO:
    """An aiohttp session against one kube-apiserver; use as ``async with``."""

    def __init__(self, *, server: str, ssl_context: ssl.SSLContext, concurrency: int = 32):
        self.server = server.rstrip("/")
        self.ssl_context = ssl_context
        self.concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeIO:
        connector = aiohttp.TCPConnector(ssl=self.ssl_context, limit=self.concurrency + 8)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("KubeIO used outside 'async with'")
        return self._session

    async def create_pod(self, namespace: str, pod: Manifest) -> float:
        """POST one pod; returns the monotonic time the API server acknowledged it."""
        url = f"{self.server}/api/v1/namespaces/{namespace}/pods"
        body = orjson.dumps(pod)
        for attempt in range(5):
            async with self.session.post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as resp:
                text = await resp.read()
                if resp.status == 201:
                    return time.monotonic()
                if resp.status in (429, 500, 503, 504) and attempt < 4:
                    await asyncio.sleep(0.2 * (attempt + 1))
                    continue
                raise ApiError(f"create pod: HTTP {resp.status}: {text[:300]!r}")
        raise AssertionError("unreachable")

    async def create_pods(self, namespace: str, pods: Sequence[Manifest]) -> dict[str, float]:
        """Create all pods as fast as the API server takes them; name -> acknowledged at."""
        sem = asyncio.Semaphore(self.concurrency)
        created: dict[str, float] = {}

        async def one(pod: Manifest) -> None:
            async with sem:
                created[pod["metadata"]["name"]] = await self.create_pod(namespace, pod)

        await asyncio.gather(*(one(p) for p in pods))
        return created

    async def create_pods_at_rate(
        self, namespace: str, pods: Sequence[Manifest], *, rate: float
    ) -> tuple[dict[str, float], float]:
        """Send pod ``i`` at ``start + i / rate`` (each in its own task, so a slow answer
        does not delay the next); returns (name -> acknowledged at, the achieved send rate)."""
        created: dict[str, float] = {}
        tasks: list[asyncio.Task[None]] = []
        start = time.monotonic()

        async def one(pod: Manifest) -> None:
            created[pod["metadata"]["name"]] = await self.create_pod(namespace, pod)

        for i, pod in enumerate(pods):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(pod)))
        sent_in = time.monotonic() - start
        await asyncio.gather(*tasks)
        achieved = (len(pods) - 1) / sent_in if sent_in > 0 and len(pods) > 1 else rate
        return created, achieved

    async def list_pods(self, namespace: str, *, label_selector: str = "") -> Manifest:
        """GET the namespace's pod list as plain JSON."""
        params = {"labelSelector": label_selector} if label_selector else {}
        async with self.session.get(
            f"{self.server}/api/v1/namespaces/{namespace}/pods", params=params
        ) as resp:
            data = await resp.read()
            if resp.status != 200:
                raise ApiError(f"list pods: HTTP {resp.status}: {data[:300]!r}")
        result: Manifest = orjson.loads(data)
        return result


class BindWatch:
    """Watches one namespace and records when each pod was first seen with a node.

    ``bound`` maps pod name -> monotonic time of the event that first showed
    ``spec.nodeName``; ``node_of`` the node. Start with ``start()``; ``wait(count)`` returns
    once that many admitted pods are bound or the timeout passes.
    """

    def __init__(self, io: KubeIO, namespace: str, *, only: Callable[[str], bool] | None = None):
        self.io = io
        self.namespace = namespace
        self.only = only or (lambda _name: True)
        self.bound: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        #: Admitted pods seen Running (kwok's status update after the bind).
        self.running: set[str] = set()
        self.events = 0
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        """List (to get a resourceVersion and the pods bound already), then watch from it."""
        listing = await self.io.list_pods(self.namespace)
        now = time.monotonic()
        for item in listing.get("items", []):
            self._observe(item, now)
        rv = str(listing["metadata"]["resourceVersion"])
        self._task = asyncio.create_task(self._run(rv))
        await asyncio.wait_for(self._ready.wait(), 30)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _observe(self, pod: Manifest, now: float) -> None:
        name = pod["metadata"]["name"]
        if not self.only(name):
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node and name not in self.bound:
            self.bound[name] = now
            self.node_of[name] = node
            self._changed.set()
        if (pod.get("status") or {}).get("phase") == "Running" and name not in self.running:
            self.running.add(name)
            self._changed.set()

    async def _run(self, rv: str) -> None:
        url = f"{self.io.server}/api/v1/namespaces/{self.namespace}/pods"
        while True:
            params = {
                "watch": "1",
                "resourceVersion": rv,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "3600",
            }
            try:
                async with self.io.session.get(url, params=params) as resp:
                    if resp.status != 200:
                        raise ApiError(f"watch: HTTP {resp.status}")
                    self._ready.set()
                    async for line in resp.content:
                        if not line.strip():
                            continue
                        now = time.monotonic()
                        event = orjson.loads(line)
                        obj = event.get("object") or {}
                        etype = event.get("type")
                        if etype == "ERROR":
                            raise ApiError(f"watch error: {obj.get('message')}")
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        if etype in ("ADDED", "MODIFIED"):
                            self.events += 1
                            self._observe(obj, now)
            except (TimeoutError, aiohttp.ClientError, ApiError) as exc:
                # A 410 Gone would need a relist; the runs are short enough that it never
                # happens, so retrying from the last resourceVersion is enough.
                log.warning("bind watch on %s restarts: %s", self.namespace, exc)
                await asyncio.sleep(0.2)

    async def wait(self, count: int, *, within: float, running: bool = False) -> bool:
        """True once ``count`` pods (those ``only`` admits) are bound (or, with ``running``,
        Running); False after ``within`` seconds."""
        seen: dict[str, float] | set[str] = self.running if running else self.bound
        deadline = time.monotonic() + within
        while len(seen) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 1.0))
        return True
