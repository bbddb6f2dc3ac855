"""The one way splitsched reaches the Kubernetes API server: where it is, how to trust it
and how to authenticate to it (a kubeconfig or the in-cluster config), and one aiohttp
session to call it.

Called by the watcher's list/watch (`services.watcher.listwatch`: an endpoint and
`open_session`), the binder (`services.binder.kubeapi` subclasses `KubeClient` with the
calls it makes) and the scheduler's Lease (`services.scheduler.leader`). The official
python client is used only to *read* the configuration (TLS files, bearer token or client
certificate, host, ``tls-server-name``): its model classes cost far more than the few JSON
fields we need. A configuration that cannot be used fails at start with a
`KubeConfigError` naming the file and the field.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import orjson
import yaml

from splitsched.runtime import ratelimit
from splitsched.runtime.config import ConfigError

#: What a request to the API server raises when the network fails (not an HTTP answer).
NETWORK_ERRORS: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError, OSError)

IN_CLUSTER = "the in-cluster config"


class ApiError(Exception):
    """An answer other than the one asked for, from a list or a watch: its HTTP status (or
    a watch ERROR event's code) and the start of its message."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


class KubeConfigError(ConfigError):
    """A kubeconfig or in-cluster config that cannot be used: ``"<source>: <problem>"``,
    where `source` names the file (or the in-cluster config) and `problem` the field."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


@dataclass(frozen=True)
class KubeEndpoint:
    """Where the API server is and how to trust and authenticate to it."""

    host: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    #: Returns the ``Authorization`` header value (``Bearer ...``) or None; called per
    #: request so rotated in-cluster tokens are picked up.
    auth_header: Callable[[], str | None] | None = None
    #: The name the server's certificate must carry (kubeconfig ``tls-server-name``),
    #: when `host` is an address the certificate does not name; also sent as SNI.
    tls_server_name: str | None = None
    #: False when the configuration turns host-name checking off (``assert_hostname``
    #: False); the certificate chain is still verified.
    check_hostname: bool = True
    #: Where this was read from, for messages: "kubeconfig PATH" or the in-cluster config.
    source: str = ""

    def url(self, path: str) -> str:
        return self.host + path

    def headers(self) -> dict[str, str]:
        """The headers every request carries: JSON accepted, and the credential if any."""
        headers = {"Accept": "application/json"}
        if self.auth_header is not None:
            auth = self.auth_header()
            if auth:
                headers["Authorization"] = auth
        return headers


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


def load_endpoint(kubeconfig: str | None, *, context: str | None = None) -> KubeEndpoint:
    """Read a kubeconfig file (or the in-cluster config when `kubeconfig` is None), with
    its `context` (default: its current context), and check it now: the server URL, the
    client certificate and key, the CA bundle."""
    source = f"kubeconfig {kubeconfig}" if kubeconfig else IN_CLUSTER
    if kubeconfig and context:
        source += f" (context {context})"
    if kubeconfig:
        _check_files(kubeconfig, source=source, context=context)
    try:
        conf = _read_configuration(kubeconfig, context=context)
    except Exception as exc:  # the kubernetes config loader raises several kinds
        raise KubeConfigError(source, str(exc)) from exc
    endpoint = endpoint_from_configuration(conf, source=source)
    ssl_context(endpoint)  # unreadable or mismatched TLS files fail here, named
    return endpoint


#: The kubeconfig fields that name files, by section of the current context.
FILE_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


def _check_files(kubeconfig: str, *, source: str, context: str | None = None) -> None:
    """An unreadable kubeconfig, or a file its current context names that does not exist,
    fails here naming the field (the client's loader says "No configuration found" or
    "File does not exist"). Anything else about the document is left to the loader."""
    try:
        text = Path(kubeconfig).read_text(encoding="utf-8")
    except OSError as exc:
        raise KubeConfigError(source, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        return
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return
    if not isinstance(doc, dict):
        return
    chosen = _named(doc, "contexts", context or doc.get("current-context"))
    base = Path(kubeconfig).parent
    for section, fields in FILE_FIELDS.items():
        entry = _named(doc, f"{section}s", chosen.get(section))
        for name in fields:
            value = entry.get(name)
            if isinstance(value, str) and value and not (base / value).is_file():
                raise KubeConfigError(source, f"{name} {value}: no such file")


def _named(doc: dict[str, Any], section: str, name: object) -> dict[str, Any]:
    """The body of the item called `name` in a kubeconfig list ({} when absent)."""
    for item in doc.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            body = item.get(section[:-1])
            return body if isinstance(body, dict) else {}
    return {}


def _read_configuration(kubeconfig: str | None, *, context: str | None = None) -> Any:
    from kubernetes import client as kclient
    from kubernetes import config as kconfig

    conf = kclient.Configuration()
    if kubeconfig:
        kconfig.load_kube_config(
            config_file=kubeconfig,
            context=context,
            client_configuration=conf,
            persist_config=False,
        )
    else:
        kconfig.load_incluster_config(client_configuration=conf)
    return conf


def endpoint_from_configuration(conf: Any, *, source: str) -> KubeEndpoint:
    """A `KubeEndpoint` from a loaded ``kubernetes.client.Configuration``."""
    host = str(conf.host or "").rstrip("/")
    if not host.startswith(("http://", "https://")):
        raise KubeConfigError(source, f"server {host!r}: expected an http:// or https:// URL")
    if bool(conf.cert_file) != bool(conf.key_file):
        raise KubeConfigError(source, "client-certificate and client-key: give both or neither")

    def auth_header() -> str | None:
        # auth_settings() runs the client's token refresh hook (rotated in-cluster tokens,
        # exec plugins) and knows its key name ("BearerToken" or "authorization").
        for setting in conf.auth_settings().values():
            if setting.get("in") == "header" and setting.get("key", "").lower() == "authorization":
                value = setting.get("value")
                if value:
                    return bearer_authorization(str(value))
        return None

    # assert_hostname (set only by code, never by a kubeconfig): False turns the host-name
    # check off; a name is checked instead of the host, as tls-server-name is.
    assert_hostname = getattr(conf, "assert_hostname", None)
    server_name = getattr(conf, "tls_server_name", None) or (
        assert_hostname if isinstance(assert_hostname, str) and assert_hostname else None
    )
    has_token = bool(conf.api_key) or conf.refresh_api_key_hook is not None
    return KubeEndpoint(
        host=host,
        ca_file=conf.ssl_ca_cert or None,
        cert_file=conf.cert_file or None,
        key_file=conf.key_file or None,
        verify_ssl=bool(conf.verify_ssl),
        auth_header=auth_header if has_token else None,
        tls_server_name=server_name,
        check_hostname=assert_hostname is not False,
        source=source,
    )


def ssl_context(endpoint: KubeEndpoint) -> ssl.SSLContext | bool:
    """The TLS context for `endpoint` (False for plain http); raises KubeConfigError
    naming the field when a file cannot be used."""
    if not endpoint.host.startswith("https://"):
        return False
    where = endpoint.source or endpoint.host
    ca = endpoint.ca_file if endpoint.verify_ssl else None
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise KubeConfigError(where, f"certificate-authority {ca}: {_reason(exc)}") from None
    if not endpoint.verify_ssl:  # insecure-skip-tls-verify
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif not endpoint.check_hostname:
        ctx.check_hostname = False
    if endpoint.cert_file and endpoint.key_file:
        try:
            ctx.load_cert_chain(endpoint.cert_file, endpoint.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise KubeConfigError(
                where,
                f"client-certificate {endpoint.cert_file} / client-key {endpoint.key_file}: "
                f"{_reason(exc)}",
            ) from None
    return ctx


def _reason(exc: OSError | ssl.SSLError) -> str:
    # Never a file's contents: OpenSSL's reason or the OS error only.
    return str(getattr(exc, "reason", None) or exc.strerror or exc)


def open_session(
    endpoint: KubeEndpoint, *, limit: int, keepalive_timeout: float = 15.0
) -> aiohttp.ClientSession:
    """A keep-alive session to `endpoint` (must run inside the event loop); pass
    ``server_hostname=endpoint.tls_server_name`` on each request made with it."""
    connector = aiohttp.TCPConnector(
        ssl=ssl_context(endpoint), limit=limit, keepalive_timeout=keepalive_timeout
    )
    return aiohttp.ClientSession(connector=connector)


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


async def json_lines(response: aiohttp.ClientResponse) -> AsyncIterator[Any]:
    """The JSON documents of a streamed answer, one per line, as they arrive (a watch's
    events). A line that is not JSON raises ``orjson.JSONDecodeError`` (a ValueError)."""
    pending = b""
    async for chunk in response.content.iter_any():
        pending += chunk
        if b"\n" not in pending:
            continue
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield orjson.loads(line)
    if pending.strip():
        yield orjson.loads(pending)


class Answered(Protocol):
    """What `server_throttled` reads of an answer (`Response` is one)."""

    @property
    def status(self) -> int: ...

    @property
    def body(self) -> Any: ...

    @property
    def retry_after(self) -> float | None: ...


def server_throttled(response: Answered) -> bool:
    """A 429 with Retry-After that speaks for the server, not for one object: the answer of
    API Priority and Fairness or the max-in-flight limit (plain text), or a Status with no
    causes. The Eviction API's refusal (a disruption budget) names its cause and is about
    one pod: it must not hold back the client's other requests."""
    if response.status != 429 or response.retry_after is None:
        return False
    body = response.body
    if not isinstance(body, dict):
        return True
    details = body.get("details")
    return not (isinstance(details, dict) and details.get("causes"))


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
        on_throttled: Callable[[float], None] | None = None,
        on_sent: Callable[[str], None] | None = None,
    ) -> None:
        """`on_throttled` is told the Retry-After of each throttling answer, `on_sent` the
        method of each request the limiter let go (metrics: a bench checks the rate)."""
        self.endpoint = endpoint
        self._on_sent = on_sent
        self.limiter = ratelimit.RateLimiter(
            qps=qps, burst=burst or max(1, int(qps)), server=endpoint.host,
            on_throttled=on_throttled,
        )  # fmt: skip
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Open the connection pool (must run inside the event loop)."""
        if self._session is None:
            self._session = open_session(
                self.endpoint, limit=self._max_connections, keepalive_timeout=60.0
            )

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "",
        budget: float = 10.0,
    ) -> Response:
        """One request taking at most `budget` seconds, the wait for the limiter included
        (a request held back past its budget is never sent: raises TimeoutError, and a
        Binding cannot land after its decision's deadline); JSON in, JSON out. ``accept``
        replaces the JSON Accept header (a Table: still JSON)."""
        await self.start()
        assert self._session is not None
        start = time.monotonic()
        async with asyncio.timeout(budget):
            await self.limiter.acquire()
        try:
            if self._on_sent is not None:
                self._on_sent(method)
            budget -= time.monotonic() - start
            response = await self._send(method, path, body, content_type, budget, accept)
            if response.retry_after is not None and server_throttled(response):
                self.limiter.throttled(response.retry_after)
            return response
        finally:
            self.limiter.release()

    async def health_request(self, path: str, *, budget: float = 5.0) -> Response:
        """A GET that skips the limiter (a health probe: whether the server answers must
        not wait behind this client's own queued work, or a binder rate-limited by
        `--qps`, or held off by the server, would call a live server unreachable)."""
        await self.start()
        return await self._send("GET", path, None, "application/json", budget)

    @contextlib.asynccontextmanager
    async def stream(self, path: str, *, idle: float) -> AsyncIterator[aiohttp.ClientResponse]:
        """A GET whose answer is read as it comes (a watch: read it with `json_lines`),
        given up when nothing arrives for `idle` seconds. It skips the limiter: one long
        request, and what it brings saves requests the limiter would count."""
        await self.start()
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=idle)
        async with self._session.get(
            self.endpoint.url(path), headers=self.endpoint.headers(), timeout=timeout,
            server_hostname=self.endpoint.tls_server_name,
        ) as response:  # fmt: skip
            yield response

    async def _send(
        self, method: str, path: str, body: Any, content_type: str, budget: float,
        accept: str = "",
    ) -> Response:  # fmt: skip
        assert self._session is not None
        headers = self.endpoint.headers()
        if accept:
            headers["Accept"] = accept
        data: bytes | None = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        async with self._session.request(
            method,
            self.endpoint.url(path),
            data=data,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=max(0.05, budget)),
            server_hostname=self.endpoint.tls_server_name,
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
