"""The binder's Kubernetes API client: raw JSON over one keep-alive aiohttp connection pool.

Called by ``services.binder.worker`` (Binding POSTs, pod GETs after a 409, Events, the
PodScheduled condition, a preemptor's nominatedNodeName, Evictions of preemption victims)
and ``services.binder.main`` (readiness probe). The official
python client is used only to *read* the kubeconfig or in-cluster config (TLS files,
bearer token, host): its ``create_namespaced_binding`` cannot decode the Status the
API server returns, and its model classes cost far more than the JSON we need.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

# Where the API server is and how to authenticate: shared with the scheduler's Lease client.
from splitsched.runtime.kubeclient import KubeEndpoint as KubeEndpoint
from splitsched.runtime.kubeclient import load_endpoint as load_endpoint
from splitsched.runtime.kubeclient import ssl_context

log = logging.getLogger(__name__)

#: Per-request timeout when the caller gives none (seconds).
DEFAULT_REQUEST_TIMEOUT = 10.0


@dataclass(frozen=True)
class HttpResult:
    """One API response: status, decoded JSON body (or None) and a parsed Retry-After."""

    status: int
    body: Any
    retry_after: float | None = None

    @property
    def message(self) -> str:
        """The Status message the API server sent, or the raw body."""
        if isinstance(self.body, dict):
            return str(self.body.get("message") or self.body.get("reason") or "")
        return "" if self.body is None else str(self.body)[:500]


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


class RateLimiter:
    """A token bucket (client-side ``--qps``/``--burst``, like client-go's); qps 0 = off."""

    def __init__(self, *, qps: float, burst: int) -> None:
        self._qps = qps
        self._burst = float(max(1, burst))
        self._tokens = self._burst
        self._last = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self._qps <= 0:
            return
        async with self._lock:
            while True:
                now = time.monotonic()
                self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
                self._last = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await asyncio.sleep((1.0 - self._tokens) / self._qps)


class KubeClient:
    """The few API calls the binder makes, on one shared aiohttp session.

    Network errors (``aiohttp.ClientError``, ``asyncio.TimeoutError``, ``OSError``)
    propagate; the worker decides what is retryable.
    """

    def __init__(
        self,
        endpoint: KubeEndpoint,
        *,
        qps: float = 0.0,
        burst: int = 0,
        max_connections: int = 64,
    ) -> None:
        self.endpoint = endpoint
        self._limiter = RateLimiter(qps=qps, burst=burst or max(1, int(qps)))
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Open the connection pool (must run inside the event loop)."""
        if self._session is None:
            connector = aiohttp.TCPConnector(
                ssl=ssl_context(self.endpoint),
                limit=self._max_connections,
                keepalive_timeout=60.0,
            )
            self._session = aiohttp.ClientSession(
                connector=connector, json_serialize=lambda o: orjson.dumps(o).decode()
            )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        budget: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> HttpResult:
        """One HTTP request taking at most ``budget`` seconds; JSON bodies are decoded."""
        await self.start()
        assert self._session is not None
        await self._limiter.acquire()
        headers = {"Accept": "application/json"}
        if self.endpoint.auth_header is not None:
            auth = self.endpoint.auth_header()
            if auth:
                headers["Authorization"] = auth
        data: bytes | None = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        async with self._session.request(
            method,
            self.endpoint.host + path,
            data=data,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=max(0.05, budget)),
        ) as resp:
            raw = await resp.read()
            decoded: Any = None
            if raw:
                try:
                    decoded = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    decoded = raw.decode("utf-8", "replace")
            return HttpResult(
                status=resp.status,
                body=decoded,
                retry_after=parse_retry_after(resp.headers.get("Retry-After")),
            )

    # -- the calls the binder makes --------------------------------------------------------

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, budget: float
    ) -> HttpResult:
        """POST pods/{name}/binding with the pod's uid as a precondition."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding"
        return await self.request("POST", path, body=body, budget=budget)

    async def get_pod(self, *, namespace: str, name: str, budget: float) -> HttpResult:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        return await self.request("GET", path, budget=budget)

    async def create_event(self, *, namespace: str, event: dict[str, Any]) -> HttpResult:
        """Create an ``events.k8s.io/v1`` Event."""
        path = f"/apis/events.k8s.io/v1/namespaces/{quote(namespace)}/events"
        return await self.request("POST", path, body=event)

    async def patch_pod_status(
        self,
        *,
        namespace: str,
        name: str,
        patch: dict[str, Any],
        content_type: str = "application/strategic-merge-patch+json",
        budget: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> HttpResult:
        """PATCH of pods/{name}/status (strategic merge unless ``content_type`` says other)."""
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status"
        return await self.request(
            "PATCH", path, body=patch, content_type=content_type, budget=budget
        )

    async def evict_pod(self, *, namespace: str, name: str, uid: str, budget: float) -> HttpResult:
        """POST a policy/v1 Eviction for pods/{name}, the pod's uid as a precondition.

        The API server checks PodDisruptionBudgets: 429 when one forbids the eviction.
        """
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/eviction"
        return await self.request("POST", path, body=body, budget=budget)

    async def probe(self, *, budget: float = 5.0) -> bool:
        """True when the API server answers ``/readyz`` (or ``/version``) with 200."""
        for path in ("/readyz", "/version"):
            try:
                result = await self.request("GET", path, budget=budget)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                log.debug("API server probe %s failed: %s", path, exc)
                return False
            if result.status == 200:
                return True
        return False
