"""The one Kubernetes access path over real TLS: an API server whose certificate names only
``kube.test``, reached at 127.0.0.1. With the kubeconfig's ``tls-server-name: kube.test``
the runtime client (binder, Lease) and the watcher's list both verify it and get through;
without it the handshake is refused (the address is not in the certificate).

The API server is an aiohttp app on port 0 answering /version and an empty NodeList.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web

from services.watcher import entries, listwatch, metrics, ring
from splitsched.runtime import kubeclient
from tests.support import certs

NAME = "kube.test"


@asynccontextmanager
async def fake_api(tmp_path: Path) -> AsyncIterator[tuple[int, certs.Issued]]:
    """An HTTPS API server whose certificate names only NAME; yields its port and CA."""
    ca = certs.make_ca(tmp_path)
    leaf = certs.issue(ca, tmp_path, name="apiserver", common_name=NAME, dns_names=(NAME,), ips=())
    seen: list[str] = []

    async def version(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"gitVersion": "v1.0.0"})

    async def nodes(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"kind": "NodeList", "metadata": {"resourceVersion": "42"}})

    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_get("/api/v1/nodes", nodes)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(leaf.cert_path, leaf.key_path)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield port, ca
    finally:
        await runner.cleanup()
    assert all(auth == "Bearer t0ken" for auth in seen), seen


def kubeconfig(tmp_path: Path, port: int, ca: certs.Issued, *, server_name: bool) -> str:
    cluster = {"server": f"https://127.0.0.1:{port}", "certificate-authority": str(ca.cert_path)}
    if server_name:
        cluster["tls-server-name"] = NAME
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / f"kubeconfig-{server_name}"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


async def client_version(path: str) -> int:
    client = kubeclient.KubeClient(kubeclient.load_endpoint(path))
    try:
        return (await client.request("GET", "/version", budget=5.0)).status
    finally:
        await client.close()


async def watcher_list(path: str) -> str:
    endpoint = kubeclient.load_endpoint(path)
    session = kubeclient.open_session(endpoint, limit=0)
    reflector = listwatch.Reflector(
        resource=listwatch.NODES,
        hub=ring.ClusterHub(ring_size=10, first_sequence=1),
        converter=entries.Converter(),
        endpoint=endpoint,
        session=session,
        metrics=metrics.Metrics(None),
    )
    try:
        await reflector.relist()
    finally:
        await session.close()
    return reflector.resource_version


def test_tls_server_name_lets_both_clients_verify_a_server_reached_by_address(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with fake_api(tmp_path) as (port, ca):
            named = kubeconfig(tmp_path, port, ca, server_name=True)
            assert await client_version(named) == 200
            assert await watcher_list(named) == "42"
            unnamed = kubeconfig(tmp_path, port, ca, server_name=False)
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await client_version(unnamed)
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await watcher_list(unnamed)

    asyncio.run(main())
