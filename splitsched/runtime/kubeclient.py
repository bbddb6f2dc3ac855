"""A minimal raw-JSON Kubernetes API client: where the API server is, how to authenticate
to it (a kubeconfig or the in-cluster config), and one aiohttp session to call it.

Called by `services.scheduler.leader` (the Lease, the scheduler's only API access) and
`services.binder.kubeapi` (its endpoint and TLS). The official python client is used only
to *read* the configuration (TLS files, bearer token or client certificate, host): its
model classes cost far more than the few JSON fields we need.
"""

from __future__ import annotations

import ssl
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
                    return str(value)
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
    """One API answer: HTTP status and the decoded JSON body (None when empty or not JSON)."""

    status: int
    body: Any

    @property
    def message(self) -> str:
        """The Status message the API server sent, if any."""
        if isinstance(self.body, dict):
            return str(self.body.get("message") or self.body.get("reason") or "")
        return ""


class KubeClient:
    """One keep-alive aiohttp session to the API server. Network errors
    (`aiohttp.ClientError`, `TimeoutError`, `OSError`) propagate to the caller."""

    def __init__(self, endpoint: KubeEndpoint, *, max_connections: int = 4) -> None:
        self.endpoint = endpoint
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    async def request(
        self, method: str, path: str, *, body: Any = None, budget: float = 10.0
    ) -> Response:
        """One request taking at most `budget` seconds; JSON in, JSON out."""
        if self._session is None:
            connector = aiohttp.TCPConnector(
                ssl=ssl_context(self.endpoint), limit=self._max_connections
            )
            self._session = aiohttp.ClientSession(connector=connector)
        headers = {"Accept": "application/json"}
        if self.endpoint.auth_header is not None:
            auth = self.endpoint.auth_header()
            if auth:
                headers["Authorization"] = auth
        data: bytes | None = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
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
                decoded = None
        return Response(status=resp.status, body=decoded)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
