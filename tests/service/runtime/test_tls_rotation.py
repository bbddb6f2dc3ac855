"""Certificate rotation on a real in-process mutual-TLS server and a `ReloadingChannel`
client, with no restart: every certificate is re-issued from a new CA (the bundle trusts
both CAs, then new leaves, then only the new CA). After each step a call succeeds and the
server presents the current certificate; the channel was made again at each step, a call
in flight on the first channel was not cut by the swaps, and at the end the server
refuses a client of the old CA or with an old certificate."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from splitsched.runtime import grpcsrv, tlsreload
from tests.support import certs

SERVICE = "splitsched.v1.Scheduler"
SERVING = health_pb2.HealthCheckResponse.SERVING
TIMEOUT = 10.0


async def health(stub: health_pb2_grpc.HealthStub) -> grpc.StatusCode:
    try:
        await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def read_into(watch: Any, seen: asyncio.Queue[int]) -> None:
    """Put each status the watch streams into `seen`, until the call ends."""
    with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
        async for response in watch:
            seen.put_nowait(response.status)


async def one_shot(target: str, tls: grpcsrv.ClientTls) -> grpc.StatusCode:
    async with grpcsrv.channel(target, tls=tls) as channel:
        return await health(health_pb2_grpc.HealthStub(channel))


def test_every_certificate_rotated_from_a_new_ca_without_a_restart(tmp_path: Path) -> None:
    d, old = tmp_path, tmp_path / "old"
    issued = certs.write_stack_certs(d)
    shutil.copytree(d, old)  # the old CA and certificates, to show they no longer work
    server_tls = grpcsrv.ServerTls(
        cert=str(d / "scheduler.crt"),
        key=str(d / "scheduler.key"),
        ca=str(d / "ca.crt"),
        require_client_cert=True,
    )
    client_tls = grpcsrv.ClientTls(
        ca=str(d / "ca.crt"),
        cert=str(d / "binder.crt"),
        key=str(d / "binder.key"),
        server_name="localhost",
    )

    async def main() -> None:
        srv = await grpcsrv.serve(
            listen="127.0.0.1:0", servicers=[], service_names=[SERVICE], tls=server_tls
        )
        target = f"127.0.0.1:{srv.port}"
        channels = tlsreload.ReloadingChannel(
            target,
            open_channel=lambda t: grpcsrv.channel(t, tls=client_tls),
            make_stub=lambda channel: health_pb2_grpc.HealthStub(channel),
            tls=client_tls,
        )
        try:
            assert await health(channels.stub) == grpc.StatusCode.OK
            # A call in flight on the first channel: a task reading a watch of the health.
            watch = channels.stub.Watch(health_pb2.HealthCheckRequest(service=SERVICE))
            seen: asyncio.Queue[int] = asyncio.Queue()
            reading = asyncio.create_task(read_into(watch, seen))
            assert await seen.get() != SERVING

            for step, new in certs.rotate_stack(d, issued["ca"]):
                assert await health(channels.stub) == grpc.StatusCode.OK, step
                expected = new.get("scheduler", issued["scheduler"]).cert.serial_number
                presented = await asyncio.to_thread(certs.presented_serial, srv.port, d)
                assert presented == expected, step
            assert channels.swaps == len(certs.ROTATION_STEPS)

            await srv.set_serving(True)
            assert await seen.get() == SERVING  # the old channel still carries the call

            old_ca = dataclasses.replace(client_tls, ca=str(old / "ca.crt"))
            old_cert = dataclasses.replace(
                client_tls, cert=str(old / "binder.crt"), key=str(old / "binder.key")
            )
            assert await one_shot(target, old_ca) == grpc.StatusCode.UNAVAILABLE
            assert await one_shot(target, old_cert) == grpc.StatusCode.UNAVAILABLE
            assert await one_shot(target, client_tls) == grpc.StatusCode.OK

            # The old channel closes once its last call ends.
            watch.cancel()
            await reading
            await asyncio.wait_for(channels.close(), timeout=TIMEOUT)
        finally:
            await channels.close()
            await srv.stop(0)

    asyncio.run(main())
