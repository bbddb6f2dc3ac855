"""``FaultProxy``: the HTTP server that applies the rules. Plain HTTP on loopback in front
of an HTTPS API server, in its own asyncio loop on a background thread so synchronous
tests can drive it; forwards requests with the client's headers (its bearer token
included), streams chunked answers (watches) back as they come, and logs every exchange.
What fires is decided by ``rules.RuleBook``; the log is ``exchanges.ExchangeLog``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from splitsched.testing.faultproxy.exchanges import Exchange, ExchangeLog
from splitsched.testing.faultproxy.kubeconfig import upstream_of
from splitsched.testing.faultproxy.rules import Fault, Rule, RuleBook

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
_RELAY_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


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


def _forwardable(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}


class FaultProxy:
    """Plain HTTP on 127.0.0.1 in front of an HTTPS API server; see the package docstring."""

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
        self._rules = RuleBook(seed=seed)
        self._log = ExchangeLog()
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
        server, ctx = upstream_of(kubeconfig)
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

    def __exit__(self, *exc_info: object) -> None:
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
        return self._rules.add(rule)

    def add(self, fault: Fault, **kwargs: Any) -> Rule:
        """Shorthand for ``add_rule(Rule(fault, ...))``."""
        return self.add_rule(Rule(fault, **kwargs))

    def remove_rule(self, rule: Rule) -> None:
        self._rules.remove(rule)

    def clear_rules(self) -> None:
        """Pass everything through from now on."""
        self._rules.clear()

    @property
    def rules(self) -> list[Rule]:
        return self._rules.snapshot()

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
        return self._log.snapshot()

    def faults_applied(self) -> Counter[str]:
        """How many requests each fault class hit (latency counted per delayed request)."""
        return self._log.faults_applied()

    def accepted_bindings(self) -> Counter[str]:
        """``namespace/name`` -> Binding POSTs the API server answered 201 (whether or not
        the client heard it). More than 1 for a pod would be a double booking."""
        return self._log.accepted_bindings()

    def forwarded_bindings(self) -> Counter[str]:
        """``namespace/name`` -> Binding POSTs sent on to the API server, answered or not
        (a server killed mid-request may have committed one without answering)."""
        return self._log.forwarded_bindings()

    # -- the handler -------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method, path = request.method, request.path_qs
        delay, rule = self._rules.pick(method, path)
        if delay > 0:
            await asyncio.sleep(delay)
        if rule is None or rule.fault in (Fault.LATENCY, Fault.LOSE_RESPONSE):
            return await self._forward(request, _Call(method, path, rule, delay))
        delivered = rule.fault is not Fault.RESET
        self._log.record(
            Exchange(time.time(), method, path, None, rule.fault, delivered, delay, forwarded=False)
        )
        if rule.fault is Fault.RESET:
            _reset(request)
            return web.Response(status=500)  # never sent: the connection is gone
        if rule.fault is Fault.ERROR:
            body = _status_body(rule.status, "InternalError", "injected by faultproxy")
            return web.Response(status=rule.status, body=body, content_type="application/json")
        body = _status_body(429, "TooManyRequests", "injected by faultproxy")  # THROTTLE
        return web.Response(
            status=429,
            body=body,
            content_type="application/json",
            headers={"Retry-After": f"{rule.seconds:g}"},
        )

    async def _forward(self, request: web.Request, call: _Call) -> web.StreamResponse:
        assert self._session is not None
        headers = _forwardable(request.headers)
        headers["Accept-Encoding"] = "identity"
        body = await request.read()
        try:
            upstream = await self._session.request(
                call.method,
                self.upstream + call.path,
                headers=headers,
                data=body if body else None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        except _RELAY_ERRORS as exc:
            # The API server is down or died mid-request: the client sees what it would
            # see, a broken connection. A request that got through the connect may have
            # been committed without an answer.
            sent = not isinstance(exc, aiohttp.ClientConnectorError)
            self._log.record(call.exchange(None, None, delivered=False, forwarded=sent))
            _reset(request)
            return web.Response(status=502)
        try:
            return await self._relay(request, upstream, call)
        finally:
            upstream.release()

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, call: _Call
    ) -> web.StreamResponse:
        status = upstream.status
        streaming = "content-length" not in {k.lower() for k in upstream.headers}
        if self._rules.loses(call.rule, status):
            with contextlib.suppress(*_RELAY_ERRORS):
                if not streaming:
                    await upstream.read()
            self._log.record(call.exchange(status, Fault.LOSE_RESPONSE, delivered=False))
            _reset(request)
            return web.Response(status=500)  # never sent
        headers = _forwardable(upstream.headers)
        if not streaming:
            try:
                data = await upstream.read()
            except _RELAY_ERRORS:
                self._log.record(call.exchange(status, None, delivered=False))
                _reset(request)
                return web.Response(status=502)
            self._log.record(call.exchange(status, None, delivered=True))
            return web.Response(status=status, body=data, headers=headers)
        self._log.record(call.exchange(status, None, delivered=True))
        return await self._stream(
            request, upstream, web.StreamResponse(status=status, headers=headers)
        )

    async def _stream(
        self, request: web.Request, upstream: aiohttp.ClientResponse, response: web.StreamResponse
    ) -> web.StreamResponse:
        """A watch (or any chunked answer): relay chunks as they come, cuttable."""
        key = id(response)
        self._streams[key] = (request, upstream)
        try:
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
        except (*_RELAY_ERRORS, RuntimeError):
            _reset(request)  # upstream broke or we cut it: the client must see a broken stream
        finally:
            self._streams.pop(key, None)
        return response


@dataclass(frozen=True, slots=True)
class _Call:
    """One forwarded request: what the log needs to know about it."""

    method: str
    path: str
    rule: Rule | None
    delay: float

    def exchange(
        self, status: int | None, fault: Fault | None, *, delivered: bool, forwarded: bool = True
    ) -> Exchange:
        return Exchange(
            time.time(), self.method, self.path, status, fault, delivered, self.delay, forwarded
        )
