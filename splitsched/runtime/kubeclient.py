"""A minimal raw-JSON Kubernetes API client: where the API server is, how to authenticate
to it (a kubeconfig or the in-cluster config), and one aiohttp session to call it.

Called by `services.scheduler.leader` (the Lease, the scheduler's only API access) and
`services.binder.kubeapi` (its endpoint, TLS and request code: its client subclasses
`KubeClient` with the calls the binder makes). The official python client is used only
to *read* the configuration (TLS files, bearer token or client certificate, host): its
model classes cost far more than the few JSON fields we need.
"""

from __future__ import annotations

import asyncio
import email.utils
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson


@dataclass(frozen=True)
class KubeEndpoint:
    """Where the API server is and how to authenticate to it."""

    host: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    #: Returns the ``Authorization`` header value (``Bearer ...``) or None; called per
    #: request so rotated in-cluster tokens are picked up.
    auth_header: Callable[[], str | None] | None = None


def bearer_authorization(credential: str) -> str:
    """The ``Authorization`` header value for a token as the kubernetes client stores it.

    The client keeps a kubeconfig token as ``"Bearer <token>"`` or bare, but the
    in-cluster token as ``"bearer <token>"`` (lowercase): the scheme is matched without
    regard to case, so the header never reads ``Bearer bearer <token>`` (401).
    """
    scheme, _, rest = credential.strip().partition(" ")
    if not rest:
        return f"Bearer {scheme}"
    if scheme.lower() == "bearer":
        return f"Bearer {rest.strip()}"
    return credential.strip()  # another scheme (tokens hold no spaces): leave it be


def load_endpoint(kubeconfig: str | None) -> KubeEndpoint:
    """Read a kubeconfig file (or the in-cluster config when `kubeconfig` is None)."""
    from kubernetes import client as kclient
    from kubernetes import config as kconfig

    conf = kclient.Configuration()
    if kubeconfig:
        kconfig.load_kube_config(
            config_file=kubeconfig, client_configuration=conf, persist_config=False
        )
    else:
        kconfig.load_incluster_config(client_configuration=conf)

    def auth_header() -> str | None:
        # auth_settings() runs the client's token refresh hook (rotated in-cluster tokens,
        # exec plugins) and knows its key name ("BearerToken" or "authorization").
        for setting in conf.auth_settings().values():
            if setting.get("in") == "header" and setting.get("key", "").lower() == "authorization":
                value = setting.get("value")
                if value:
                    return bearer_authorization(str(value))
        return None

    has_token = bool(conf.api_key) or conf.refresh_api_key_hook is not None
    return KubeEndpoint(
        host=str(conf.host).rstrip("/"),
        ca_file=conf.ssl_ca_cert or None,
        cert_file=conf.cert_file or None,
        key_file=conf.key_file or None,
        verify_ssl=bool(conf.verify_ssl),
        auth_header=auth_header if has_token else None,
    )


def ssl_context(endpoint: KubeEndpoint) -> ssl.SSLContext | bool:
    """The TLS context for `endpoint` (False for plain http)."""
    if not endpoint.host.startswith("https"):
        return False
    ctx = ssl.create_default_context(cafile=endpoint.ca_file)
    if not endpoint.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if endpoint.cert_file and endpoint.key_file:
        ctx.load_cert_chain(endpoint.cert_file, endpoint.key_file)
    return ctx


@dataclass(frozen=True)
class Response:
    """One API answer: HTTP status, the decoded JSON body (the text when not JSON, None when
    empty) and a parsed Retry-After."""

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
    """One keep-alive aiohttp session to the API server. Network errors
    (`aiohttp.ClientError`, `TimeoutError`, `OSError`) propagate to the caller."""

    def __init__(
        self,
        endpoint: KubeEndpoint,
        *,
        max_connections: int = 4,
        qps: float = 0.0,
        burst: int = 0,
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
            self._session = aiohttp.ClientSession(connector=connector)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        budget: float = 10.0,
    ) -> Response:
        """One request taking at most `budget` seconds; JSON in, JSON out."""
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
        return Response(
            status=resp.status,
            body=decoded,
            retry_after=parse_retry_after(resp.headers.get("Retry-After")),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
