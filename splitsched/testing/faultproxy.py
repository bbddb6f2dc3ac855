"""A fault-injecting HTTP proxy in front of the real kube-apiserver, for the fault tests.

``tests/faults`` points the binders' and the watcher's kubeconfigs at a ``FaultProxy``
(``proxied_kubeconfig``): the services speak plain HTTP to ``127.0.0.1:<port>``, the proxy
forwards every request to the API server over HTTPS (trusting the control plane's CA) with
the client's bearer token passed through, and streams responses back chunk by chunk, so
watches work through it. Tests change the rules at runtime (``add_rule``, ``clear_rules``)
while the services run:

* ``LATENCY``: delay the request ``seconds`` before forwarding it (added to other faults);
* ``ERROR``: answer ``status`` (a 5xx; or 410 Gone on a watch) with a Status body, unforwarded;
* ``THROTTLE``: answer 429 with ``Retry-After: seconds``, without forwarding;
* ``RESET``: close the client's connection with a TCP reset, without forwarding;
* ``LOSE_RESPONSE``: forward, read the real answer, then reset the client's connection
  (the classic lost Binding response: the pod is bound, the binder never hears it);
* ``cut_watches()``: abort every open streaming response (watches) now.

A rule matches by method and path regex and fires with a probability, at most ``count``
times. Every exchange is logged (``exchanges``), so a test can prove from the wire that no
pod got two Bindings accepted (``accepted_bindings``). The proxy runs its own asyncio loop
in a background thread, so synchronous tests can drive it. Test tooling, not product code.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import enum
import random
import re
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
import orjson
import yaml
from aiohttp import web

#: Headers that describe one hop, never forwarded (RFC 9110 section 7.6.1), plus the ones
#: the proxy sets itself.
_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
_BINDING_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding(?:\?|$)")


class Fault(enum.Enum):
    """What a rule does to a matching request (see the module docstring)."""

    LATENCY = "latency"
    ERROR = "error"
    THROTTLE = "throttle"
    RESET = "reset"
    LOSE_RESPONSE = "lose_response"


@dataclass
class Rule:
    """One fault for requests whose method fully matches ``method`` and whose path (with
    the query string) contains a match of ``path``.

    Fires with ``probability``, at most ``count`` times (None: unlimited). ``seconds`` is
    the delay of LATENCY and the Retry-After of THROTTLE; ``status`` the answer of ERROR.
    ``when_status``: LOSE_RESPONSE only loses answers with this status (e.g. 201).
    """

    fault: Fault
    method: str = ".*"
    path: str = ".*"
    probability: float = 1.0
    count: int | None = None
    seconds: float = 0.0
    status: int = 503
    when_status: int | None = None
    #: How many times it fired (read it from the test; the proxy updates it).
    fired: int = 0
    _method_re: re.Pattern[str] = field(init=False, repr=False)
    _path_re: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability {self.probability} is not in [0, 1]")
        if self.fault is Fault.ERROR and not 400 <= self.status <= 599:
            raise ValueError(f"ERROR status {self.status} is not an HTTP error")
        self._method_re = re.compile(self.method, re.IGNORECASE)
        self._path_re = re.compile(self.path)

    def matches(self, method: str, path: str) -> bool:
        return bool(self._method_re.fullmatch(method) and self._path_re.search(path))

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count


@dataclass(frozen=True)
class Exchange:
    """One request through the proxy, as the log keeps it."""

    at: float
    method: str
    path: str
    #: The API server's status (None when the request was not forwarded or failed).
    upstream_status: int | None
    #: The fault applied (None: passed through untouched, latency aside).
    fault: Fault | None
    #: Whether the client received an answer (False for resets and lost responses).
    delivered: bool
    delay: float = 0.0
    #: Whether the request reached the API server (False for injected resets and errors).
    forwarded: bool = True


def _status_body(code: int, reason: str, message: str) -> bytes:
    """A Kubernetes ``Status`` object, as the API server sends with errors."""
    return orjson.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


def _reset(request: web.BaseRequest) -> None:
    """Close the client's connection with a TCP RST (SO_LINGER 0), not a polite FIN."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class FaultProxy:
    """Plain HTTP on 127.0.0.1 in front of an HTTPS API server; see the module docstring."""

    def __init__(
        self,
        upstream: str,
        *,
        ssl_context: ssl.SSLContext | bool | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int | None = None,
        name: str = "faultproxy",
    ) -> None:
        """``upstream``: the API server URL; ``ssl_context``: how to verify it (None: the
        system's defaults, False: plain HTTP upstream)."""
        self.upstream = upstream.rstrip("/")
        self.name = name
        self._ssl: ssl.SSLContext | bool = True if ssl_context is None else ssl_context
        self._host = host
        self._port = port
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._log: list[Exchange] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        #: Open streaming responses: the client's request and the upstream response.
        self._streams: dict[int, tuple[web.BaseRequest, aiohttp.ClientResponse]] = {}
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self.port = 0

    @classmethod
    def for_kubeconfig(cls, kubeconfig: Path | str, **kwargs: Any) -> FaultProxy:
        """A proxy in front of the server a kubeconfig names, trusting its CA."""
        cluster = _current_cluster(yaml.safe_load(Path(kubeconfig).read_text()))
        server = str(cluster["server"])
        ctx: ssl.SSLContext | bool | None = None
        if server.startswith("https"):
            if cluster.get("insecure-skip-tls-verify"):
                ctx = False
            elif data := cluster.get("certificate-authority-data"):
                ctx = ssl.create_default_context(cadata=base64.b64decode(data).decode())
            elif path := cluster.get("certificate-authority"):
                ctx = ssl.create_default_context(cafile=str(path))
        return cls(server, ssl_context=ctx, **kwargs)

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: what the proxied kubeconfigs point at."""
        return f"http://{self._host}:{self.port}"

    def start(self, *, timeout: float = 10.0) -> FaultProxy:
        """Start the server thread; returns once it listens."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run_thread, name=self.name, daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise RuntimeError(f"{self.name} did not start within {timeout}s")
        if self._start_error is not None:
            raise RuntimeError(f"{self.name} failed to start") from self._start_error
        return self

    def stop(self, *, timeout: float = 10.0) -> None:
        """Cut open streams, stop the server and join the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run_thread(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to start()
            self._start_error = exc
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        connector = aiohttp.TCPConnector(ssl=self._ssl, limit=0, force_close=False)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()
        self.port = int(self._runner.addresses[0][1])

    async def _shutdown(self) -> None:
        self._cut_streams()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    # -- rules -------------------------------------------------------------------------

    def add_rule(self, rule: Rule) -> Rule:
        """Install a rule (rules are tried in the order they were added)."""
        with self._lock:
            self._rules.append(rule)
        return rule

    def add(self, fault: Fault, **kwargs: Any) -> Rule:
        """Shorthand for ``add_rule(Rule(fault, ...))``."""
        return self.add_rule(Rule(fault, **kwargs))

    def remove_rule(self, rule: Rule) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._rules.remove(rule)

    def clear_rules(self) -> None:
        """Pass everything through from now on."""
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def _pick(self, method: str, path: str) -> tuple[float, Rule | None]:
        """Total latency and the one answer-changing rule that fires for this request."""
        delay = 0.0
        chosen: Rule | None = None
        with self._lock:
            for rule in self._rules:
                if rule.exhausted or not rule.matches(method, path):
                    continue
                if rule.fault is Fault.LATENCY:
                    if self._rng.random() < rule.probability:
                        rule.fired += 1
                        delay += rule.seconds
                    continue
                if chosen is None and self._rng.random() < rule.probability:
                    chosen = rule
                    if rule.fault is not Fault.LOSE_RESPONSE or rule.when_status is None:
                        rule.fired += 1
        return delay, chosen

    # -- watches -----------------------------------------------------------------------

    def cut_watches(self, *, timeout: float = 5.0) -> int:
        """Abort every open streaming response now; returns how many were cut."""
        loop = self._loop
        if loop is None:
            return 0

        async def cut() -> int:
            return self._cut_streams()

        return asyncio.run_coroutine_threadsafe(cut(), loop).result(timeout)

    @property
    def open_watches(self) -> int:
        return len(self._streams)

    def _cut_streams(self) -> int:
        streams = list(self._streams.values())
        self._streams.clear()
        for request, upstream in streams:
            _reset(request)
            upstream.close()
        return len(streams)

    # -- the log -----------------------------------------------------------------------

    @property
    def exchanges(self) -> list[Exchange]:
        with self._lock:
            return list(self._log)

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self._log.append(exchange)

    def faults_applied(self) -> Counter[str]:
        """How many requests each fault class hit (latency counted per delayed request)."""
        out: Counter[str] = Counter()
        for ex in self.exchanges:
            if ex.fault is not None:
                out[ex.fault.value] += 1
            if ex.delay > 0:
                out[Fault.LATENCY.value] += 1
        return out

    def accepted_bindings(self) -> Counter[str]:
        """``namespace/name`` -> Binding POSTs the API server answered 201 (whether or not
        the client heard it). More than 1 for a pod would be a double booking."""
        out: Counter[str] = Counter()
        for ex in self.exchanges:
            m = _BINDING_PATH.match(ex.path)
            if m and ex.method == "POST" and ex.upstream_status == 201:
                out[f"{m.group(1)}/{m.group(2)}"] += 1
        return out

    def forwarded_bindings(self) -> Counter[str]:
        """``namespace/name`` -> Binding POSTs sent on to the API server, answered or not
        (a server killed mid-request may have committed one without answering)."""
        out: Counter[str] = Counter()
        for ex in self.exchanges:
            m = _BINDING_PATH.match(ex.path)
            if m and ex.method == "POST" and ex.forwarded:
                out[f"{m.group(1)}/{m.group(2)}"] += 1
        return out

    # -- the handler -------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method, path = request.method, request.path_qs
        delay, rule = self._pick(method, path)
        if delay > 0:
            await asyncio.sleep(delay)
        fault = rule.fault if rule is not None else None
        if fault is Fault.RESET:
            self._record(
                Exchange(time.time(), method, path, None, fault, False, delay, forwarded=False)
            )
            _reset(request)
            return web.Response(status=500)  # never sent: the connection is gone
        if fault is Fault.ERROR:
            assert rule is not None
            self._record(
                Exchange(time.time(), method, path, None, fault, True, delay, forwarded=False)
            )
            body = _status_body(rule.status, "InternalError", "injected by faultproxy")
            return web.Response(status=rule.status, body=body, content_type="application/json")
        if fault is Fault.THROTTLE:
            assert rule is not None
            self._record(
                Exchange(time.time(), method, path, None, fault, True, delay, forwarded=False)
            )
            body = _status_body(429, "TooManyRequests", "injected by faultproxy")
            return web.Response(
                status=429,
                body=body,
                content_type="application/json",
                headers={"Retry-After": f"{rule.seconds:g}"},
            )
        return await self._forward(request, method, path, rule, delay)

    async def _forward(
        self, request: web.Request, method: str, path: str, rule: Rule | None, delay: float
    ) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        headers["Accept-Encoding"] = "identity"
        body = await request.read()
        try:
            upstream = await self._session.request(
                method,
                self.upstream + path,
                headers=headers,
                data=body if body else None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            # The API server is down or died mid-request: the client sees what it would
            # see, a broken connection. A request that got through the connect may have
            # been committed without an answer.
            sent = not isinstance(exc, aiohttp.ClientConnectorError)
            self._record(
                Exchange(time.time(), method, path, None, None, False, delay, forwarded=sent)
            )
            _reset(request)
            return web.Response(status=502)
        try:
            return await self._relay(request, upstream, method, path, rule, delay)
        finally:
            upstream.release()

    async def _relay(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        method: str,
        path: str,
        rule: Rule | None,
        delay: float,
    ) -> web.StreamResponse:
        status = upstream.status
        lose = rule is not None and rule.fault is Fault.LOSE_RESPONSE
        if lose and rule is not None and rule.when_status is not None:
            lose = status == rule.when_status
            if lose:
                with self._lock:
                    rule.fired += 1
        headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_HEADERS}
        streaming = "content-length" not in {k.lower() for k in upstream.headers}
        if lose:
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                if not streaming:
                    await upstream.read()
            lost = Exchange(time.time(), method, path, status, Fault.LOSE_RESPONSE, False, delay)
            self._record(lost)
            _reset(request)
            return web.Response(status=500)  # never sent
        if not streaming:
            try:
                data = await upstream.read()
            except (aiohttp.ClientError, OSError, TimeoutError):
                self._record(Exchange(time.time(), method, path, status, None, False, delay))
                _reset(request)
                return web.Response(status=502)
            self._record(Exchange(time.time(), method, path, status, None, True, delay))
            return web.Response(status=status, body=data, headers=headers)
        # A watch (or any chunked answer): relay chunks as they come.
        self._record(Exchange(time.time(), method, path, status, None, True, delay))
        response = web.StreamResponse(status=status, headers=headers)
        key = id(response)
        self._streams[key] = (request, upstream)
        try:
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
        except (aiohttp.ClientError, OSError, TimeoutError, RuntimeError):
            _reset(request)  # upstream broke or we cut it: the client must see a broken stream
        finally:
            self._streams.pop(key, None)
        return response


def _current_cluster(config: dict[str, Any]) -> dict[str, Any]:
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    current = config.get("current-context")
    cluster_name = (
        contexts[current]["cluster"] if current in contexts else config["clusters"][0]["name"]
    )
    for c in config.get("clusters") or []:
        if c["name"] == cluster_name:
            cluster: dict[str, Any] = c["cluster"]
            return cluster
    raise ValueError(f"kubeconfig has no cluster named {cluster_name!r}")


def proxied_kubeconfig(source: Path | str, *, proxy_url: str, dest: Path | None = None) -> Path:
    """A copy of a (bearer-token) kubeconfig whose server is ``proxy_url``, without a CA.

    Client certificates cannot pass through a plain-HTTP proxy: use token kubeconfigs such
    as ``splitsched.testing.stack.component_kubeconfigs`` writes.
    """
    source = Path(source)
    config = yaml.safe_load(source.read_text())
    cluster = _current_cluster(config)
    for key in ("certificate-authority", "certificate-authority-data", "tls-server-name"):
        cluster.pop(key, None)
    cluster["server"] = proxy_url
    if dest is None:
        dest = Path(tempfile.mkdtemp(prefix="splitsched-proxied-")) / source.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(config, sort_keys=False))
    dest.chmod(0o600)
    return dest
