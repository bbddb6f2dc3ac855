"""The fault-injecting proxy (``splitsched.testing.faultproxy``) against a tiny local
aiohttp upstream that plays the API server's part: a list, an echo of the request's
headers, a Binding endpoint that accepts once and then answers 409 like the real one, and
a chunked watch stream. Plain HTTP upstream here; the fault tests use the real one.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from splitsched.testing import faultproxy
from splitsched.testing.faultproxy import Fault, FaultProxy


class Upstream:
    """A stand-in API server in its own thread."""

    def __init__(self) -> None:
        self.bound: dict[str, int] = {}
        self.requests: list[tuple[str, str]] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._runner: web.AppRunner | None = None

    async def _list(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path_qs))
        return web.json_response({"kind": "PodList", "items": [{"n": i} for i in range(3)]})

    async def _echo(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path_qs))
        body = await request.read()
        return web.json_response({"headers": dict(request.headers), "body": body.decode()})

    async def _bind(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path_qs))
        key = f"{request.match_info['ns']}/{request.match_info['name']}"
        self.bound[key] = self.bound.get(key, 0) + 1
        if self.bound[key] > 1:
            return web.json_response({"kind": "Status", "code": 409}, status=409)
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path_qs))
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for i in range(400):
            await resp.write(json.dumps({"type": "ADDED", "n": i}).encode() + b"\n")
            await asyncio.sleep(0.02)
        await resp.write_eof()
        return resp

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        app = web.Application()
        app.router.add_get("/api/v1/pods", self._list)
        app.router.add_route("*", "/echo", self._echo)
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", self._bind)
        app.router.add_get("/watch", self._watch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        loop.run_until_complete(self._runner.setup())
        loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", 0).start())
        self.port = int(self._runner.addresses[0][1])
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._runner.cleanup())
        loop.close()

    def start(self) -> Upstream:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._thread = None


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    up = Upstream().start()
    try:
        yield up
    finally:
        up.stop()


@pytest.fixture
def proxy(upstream: Upstream) -> Iterator[FaultProxy]:
    p = FaultProxy(f"http://127.0.0.1:{upstream.port}", ssl_context=False, seed=7).start()
    try:
        yield p
    finally:
        p.stop()


def request(
    proxy: FaultProxy,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, dict(resp.getheaders()), json.loads(data) if data else None
    finally:
        conn.close()


def bind(proxy: FaultProxy, pod: str) -> tuple[int, dict[str, str], Any]:
    return request(proxy, "POST", f"/api/v1/namespaces/ns/pods/{pod}/binding", body=b"{}")


def test_passes_requests_headers_and_bodies_through(proxy: FaultProxy) -> None:
    status, _, body = request(
        proxy, "POST", "/echo?x=1", body=b'{"a": 1}',
        headers={"Authorization": "Bearer secret-token", "Content-Type": "application/json"},
    )  # fmt: skip
    assert status == 200
    assert body["headers"]["Authorization"] == "Bearer secret-token"
    assert body["body"] == '{"a": 1}'
    status, _, listed = request(proxy, "GET", "/api/v1/pods")
    assert status == 200 and len(listed["items"]) == 3
    assert [(e.method, e.path, e.upstream_status) for e in proxy.exchanges] == [
        ("POST", "/echo?x=1", 200),
        ("GET", "/api/v1/pods", 200),
    ]


def test_error_rule_answers_without_forwarding_and_stops_after_count(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    rule = proxy.add(Fault.ERROR, method="GET", path=r"^/api/v1/pods", status=503, count=2)
    codes = [request(proxy, "GET", "/api/v1/pods")[0] for _ in range(3)]
    assert codes == [503, 503, 200]
    assert rule.fired == 2
    assert upstream.requests == [("GET", "/api/v1/pods")]  # the two 503s never reached it
    status, _, body = request(proxy, "POST", "/echo")  # another path: untouched
    assert status == 200 and body["body"] == ""


def test_error_body_is_a_kubernetes_status(proxy: FaultProxy) -> None:
    proxy.add(Fault.ERROR, status=500)
    status, _, body = request(proxy, "GET", "/api/v1/pods")
    assert status == 500
    assert body["kind"] == "Status" and body["code"] == 500


def test_throttle_sends_429_with_retry_after(proxy: FaultProxy, upstream: Upstream) -> None:
    proxy.add(Fault.THROTTLE, method="POST", seconds=1.5)
    status, headers, body = bind(proxy, "a")
    assert status == 429
    assert headers["Retry-After"] == "1.5"
    assert body["reason"] == "TooManyRequests"
    assert upstream.bound == {}


def test_reset_closes_the_connection_without_forwarding(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    proxy.add(Fault.RESET, method="POST", count=1)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        bind(proxy, "a")
    assert upstream.bound == {}
    assert bind(proxy, "a")[0] == 201  # count exhausted: passes through
    assert [(e.fault, e.forwarded) for e in proxy.exchanges] == [
        (Fault.RESET, False),
        (None, True),
    ]
    assert proxy.forwarded_bindings() == {"ns/a": 1}


def test_upstream_down_resets_the_client(proxy: FaultProxy, upstream: Upstream) -> None:
    upstream.stop()
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        bind(proxy, "a")
    (ex,) = proxy.exchanges
    assert (ex.forwarded, ex.upstream_status, ex.delivered) == (False, None, False)
    assert proxy.accepted_bindings() == {}
    assert proxy.forwarded_bindings() == {}


def test_lost_response_binds_but_the_client_never_hears_it(
    proxy: FaultProxy, upstream: Upstream
) -> None:
    proxy.add(Fault.LOSE_RESPONSE, method="POST", path="/binding$", when_status=201)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        bind(proxy, "a")
    assert upstream.bound == {"ns/a": 1}  # the API server accepted it
    # The retry sees the truth (409) and is not lost: the rule only loses 201s.
    assert bind(proxy, "a")[0] == 409
    assert proxy.accepted_bindings() == {"ns/a": 1}
    lost = [e for e in proxy.exchanges if e.fault is Fault.LOSE_RESPONSE]
    assert [(e.upstream_status, e.delivered) for e in lost] == [(201, False)]


def test_probability_zero_never_fires_and_one_always_does(proxy: FaultProxy) -> None:
    never = proxy.add(Fault.ERROR, path="/echo", probability=0.0)
    always = proxy.add(Fault.ERROR, path="/api/v1/pods", probability=1.0, status=502)
    assert [request(proxy, "GET", "/echo")[0] for _ in range(5)] == [200] * 5
    assert [request(proxy, "GET", "/api/v1/pods")[0] for _ in range(5)] == [502] * 5
    assert (never.fired, always.fired) == (0, 5)


def test_partial_probability_fires_sometimes(proxy: FaultProxy) -> None:
    rule = proxy.add(Fault.ERROR, path="/echo", probability=0.5)
    codes = [request(proxy, "GET", "/echo")[0] for _ in range(60)]
    assert 0 < codes.count(503) < 60
    assert rule.fired == codes.count(503)


def test_latency_delays_the_request_then_forwards(proxy: FaultProxy, upstream: Upstream) -> None:
    proxy.add(Fault.LATENCY, path="/echo", seconds=0.3)
    assert request(proxy, "GET", "/echo")[0] == 200
    (ex,) = proxy.exchanges
    assert ex.delay == pytest.approx(0.3)
    assert ex.upstream_status == 200
    assert proxy.faults_applied() == {"latency": 1}


def test_clear_rules_restores_pass_through(proxy: FaultProxy) -> None:
    proxy.add(Fault.ERROR)
    assert request(proxy, "GET", "/echo")[0] == 503
    proxy.clear_rules()
    assert request(proxy, "GET", "/echo")[0] == 200
    assert proxy.rules == []


def test_watch_streams_through_and_cut_breaks_it(proxy: FaultProxy) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    conn.request("GET", "/watch")
    resp = conn.getresponse()
    assert resp.status == 200
    lines = [json.loads(resp.readline()) for _ in range(3)]  # arrive before the stream ends
    assert [line["n"] for line in lines] == [0, 1, 2]
    deadline = time.monotonic() + 5
    while proxy.open_watches != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.cut_watches() == 1
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        while resp.readline():  # the rest of the buffer, then the broken chunked stream
            pass
        raise http.client.IncompleteRead(b"")  # a clean end would be a wrong answer
    conn.close()
    assert proxy.open_watches == 0


def test_rule_validation() -> None:
    with pytest.raises(ValueError):
        faultproxy.Rule(Fault.ERROR, probability=1.5)
    with pytest.raises(ValueError):
        faultproxy.Rule(Fault.ERROR, status=200)


def test_proxied_kubeconfig_points_at_the_proxy_without_a_ca(tmp_path: Path) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
         "-out", "ca.crt", "-subj", "/CN=test-ca", "-days", "1"],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    ca_data = base64.b64encode((tmp_path / "ca.crt").read_bytes()).decode()
    source = tmp_path / "sa.kubeconfig"
    source.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://127.0.0.1:6443",
                            "certificate-authority-data": ca_data,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "t0k"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    out = faultproxy.proxied_kubeconfig(
        source, proxy_url="http://127.0.0.1:9999", dest=tmp_path / "p.kubeconfig"
    )
    config = yaml.safe_load(out.read_text())
    assert config["clusters"][0]["cluster"] == {"server": "http://127.0.0.1:9999"}
    assert config["users"][0]["user"]["token"] == "t0k"
    proxy = FaultProxy.for_kubeconfig(source)  # trusts the kubeconfig's CA
    assert proxy.upstream == "https://127.0.0.1:6443"
