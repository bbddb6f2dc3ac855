"""TLS, mutual TLS and caller identity on real in-process gRPC servers, configured through
the services' own parsers (`build_parser` + `security.from_args`) and called through real
channels (`grpcsrv.channel` with `ClientTls`), with certificates from tests/support/certs.py.

Covers: a TLS server refuses plaintext; a mutual-TLS server refuses a client without a
certificate or with one from another CA (and a client refuses a server it cannot verify);
with `--trusted-clients`, the restricted RPCs (Scheduler ReportBindingOutcome and Simulate,
the Binder's RPCs, the Watcher's stream) answer PERMISSION_DENIED naming the method and
the caller's identity, while the other RPCs, health and reflection keep working.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.binder import settings as binder_settings
from services.scheduler import settings as scheduler_settings
from services.scheduler.api import SchedulerApi
from services.scheduler.state import SchedulerState
from services.watcher import ring
from services.watcher import server as watcher_server
from services.watcher import settings as watcher_settings
from splitsched.core import algorithm, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue
from splitsched.runtime import config, grpcsrv, security
from splitsched.v1 import (
    binder_pb2,
    binder_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
    watcher_pb2,
    watcher_pb2_grpc,
)
from tests.support import certs

T = TypeVar("T")
Code = grpc.StatusCode
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stack layout (ca, watcher, scheduler, binder, ops), an identity known only by a
    URI SAN, and a client from another CA with a trusted-looking name."""
    d = tmp_path_factory.mktemp("tls")
    issued = certs.write_stack_certs(d)
    certs.issue(issued["ca"], d, name="spiffe", common_name="anonymous",
                uris=("spiffe://cluster.local/ns/sched/sa/binder",))  # fmt: skip
    rogue = certs.make_ca(d, name="rogue-ca", common_name="rogue CA")
    certs.issue(rogue, d, name="rogue", common_name="splitsched-binder")
    return d


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def mtls_flags(d: Path, who: str) -> list[str]:
    return [
        "--tls-cert", str(d / f"{who}.crt"), "--tls-key", str(d / f"{who}.key"),
        "--tls-ca", str(d / "ca.crt"), "--tls-client-auth",
    ]  # fmt: skip


def client(d: Path, who: str | None, *, ca: str = "ca") -> grpcsrv.ClientTls:
    """TLS as `who` (None: no client certificate), trusting `ca`."""
    if who is None:
        return grpcsrv.ClientTls(ca=str(d / f"{ca}.crt"))
    return grpcsrv.ClientTls(
        ca=str(d / f"{ca}.crt"), cert=str(d / f"{who}.crt"), key=str(d / f"{who}.key")
    )


def scheduler_state() -> SchedulerState:
    clock = FakeClock(1000.0)
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock), profiles=profiles.load_profiles(None)
    )
    state = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="s"
    )
    state.mark_synced()
    return state


@contextlib.asynccontextmanager
async def scheduler_server(argv: list[str]) -> AsyncIterator[str]:
    """The Scheduler API configured by the scheduler's own flags; yields its target."""
    args = config.parse_args(
        scheduler_settings.build_parser(), argv, env_prefix="SPLITSCHED_TEST_UNUSED", environ={}
    )
    sec = security.from_args(args, service=scheduler_settings.SERVICE)
    api = SchedulerApi(state=scheduler_state(), on_change=lambda: None)
    srv = await grpcsrv.serve(
        listen="127.0.0.1:0",
        servicers=[(scheduler_pb2_grpc.add_SchedulerServicer_to_server, api)],
        service_names=["splitsched.v1.Scheduler"],
        tls=sec.server,
        interceptors=sec.interceptors,
    )
    await srv.set_serving(True)
    try:
        yield f"127.0.0.1:{srv.port}"
    finally:
        await srv.stop(0)


@contextlib.asynccontextmanager
async def dial(target: str, tls: grpcsrv.ClientTls | None) -> AsyncIterator[grpc.aio.Channel]:
    channel = grpcsrv.channel(target, tls=tls)
    try:
        yield channel
    finally:
        await channel.close()


async def health(target: str, tls: grpcsrv.ClientTls | None) -> Code:
    async with dial(target, tls) as ch:
        try:
            await health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(), timeout=TIMEOUT
            )
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return Code.OK


def simulate_request() -> scheduler_pb2.SimulateRequest:
    manifest = (
        "metadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: 1}}}]}"
    )
    return scheduler_pb2.SimulateRequest(manifests=[manifest])


async def call(stub: Any, method: str, request: Any) -> tuple[Code, str]:
    try:
        await getattr(stub, method)(request, timeout=TIMEOUT)
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or ""
    return Code.OK, ""


# ---- the handshake ---------------------------------------------------------------------


def test_tls_server_refuses_plaintext_and_serves_a_verifying_client(tls_dir: Path) -> None:
    async def body() -> dict[str, Code]:
        flags = ["--tls-cert", str(tls_dir / "scheduler.crt"), "--tls-key",
                 str(tls_dir / "scheduler.key")]  # fmt: skip
        async with scheduler_server(flags) as target:
            return {
                "plaintext": await health(target, None),
                "tls": await health(target, client(tls_dir, None)),
                "wrong ca": await health(target, client(tls_dir, None, ca="rogue-ca")),
            }

    assert run(body()) == {"plaintext": Code.UNAVAILABLE, "tls": Code.OK,
                           "wrong ca": Code.UNAVAILABLE}  # fmt: skip


def test_mutual_tls_refuses_clients_without_a_certificate_of_its_ca(tls_dir: Path) -> None:
    async def body() -> dict[str, Code]:
        async with scheduler_server(mtls_flags(tls_dir, "scheduler")) as target:
            return {
                "plaintext": await health(target, None),
                "no client cert": await health(target, client(tls_dir, None)),
                # Its CN is splitsched-binder, but another CA signed it.
                "other CA": await health(
                    target,
                    grpcsrv.ClientTls(
                        ca=str(tls_dir / "ca.crt"),
                        cert=str(tls_dir / "rogue.crt"),
                        key=str(tls_dir / "rogue.key"),
                    ),
                ),
                "binder": await health(target, client(tls_dir, "binder")),
            }

    assert run(body()) == {
        "plaintext": Code.UNAVAILABLE,
        "no client cert": Code.UNAVAILABLE,
        "other CA": Code.UNAVAILABLE,
        "binder": Code.OK,
    }


def test_server_name_override_verifies_a_name_the_target_lacks(tls_dir: Path) -> None:
    """The certificates name localhost and 127.0.0.1: dialing 127.0.0.1 while expecting
    another name fails, expecting localhost passes."""

    async def body() -> tuple[Code, Code]:
        async with scheduler_server(mtls_flags(tls_dir, "scheduler")) as target:
            base = client(tls_dir, "binder")
            wrong = grpcsrv.ClientTls(ca=base.ca, cert=base.cert, key=base.key,
                                      server_name="scheduler.example")  # fmt: skip
            right = grpcsrv.ClientTls(ca=base.ca, cert=base.cert, key=base.key,
                                      server_name="localhost")  # fmt: skip
            return await health(target, wrong), await health(target, right)

    assert run(body()) == (Code.UNAVAILABLE, Code.OK)


# ---- caller identity -------------------------------------------------------------------


def test_only_trusted_identities_report_outcomes_or_simulate(tls_dir: Path) -> None:
    trusted = "splitsched-binder,spiffe://cluster.local/ns/sched/sa/binder"

    async def body() -> dict[str, dict[str, tuple[Code, str]]]:
        flags = [*mtls_flags(tls_dir, "scheduler"), "--trusted-clients", trusted]
        seen: dict[str, dict[str, tuple[Code, str]]] = {}
        async with scheduler_server(flags) as target:
            for who in ("binder", "spiffe", "ops"):
                async with dial(target, client(tls_dir, who)) as ch:
                    stub = scheduler_pb2_grpc.SchedulerStub(ch)
                    report = scheduler_pb2.ReportBindingOutcomeRequest(binder_id="b")
                    seen[who] = {
                        "ReportBindingOutcome": await call(stub, "ReportBindingOutcome", report),
                        "Simulate": await call(stub, "Simulate", simulate_request()),
                        "ListPods": await call(stub, "ListPods", scheduler_pb2.ListPodsRequest()),
                        "ListNodes": await call(
                            stub, "ListNodes", scheduler_pb2.ListNodesRequest()
                        ),
                    }
        return seen

    seen = run(body())
    for who in ("binder", "spiffe"):  # by common name, by URI SAN
        assert {m: c for m, (c, _) in seen[who].items()} == dict.fromkeys(seen[who], Code.OK)
    ops = seen["ops"]
    assert ops["ListPods"][0] == ops["ListNodes"][0] == Code.OK
    for method in ("ReportBindingOutcome", "Simulate"):
        code, details = ops[method]
        assert code == Code.PERMISSION_DENIED, (method, code, details)
        assert f"/splitsched.v1.Scheduler/{method}" in details
        assert "splitsched-ops" in details


def test_an_identity_trusted_for_simulate_only_cannot_report_outcomes(tls_dir: Path) -> None:
    """The chart's scheduler trusts its binders for every restricted RPC and the ops tools
    for Simulate only: an ops certificate must not forge a binding outcome."""
    trusted = "splitsched-binder,Simulate=splitsched-ops"

    async def body() -> dict[str, dict[str, Code]]:
        flags = [*mtls_flags(tls_dir, "scheduler"), "--trusted-clients", trusted]
        seen: dict[str, dict[str, Code]] = {}
        async with scheduler_server(flags) as target:
            for who in ("binder", "ops"):
                async with dial(target, client(tls_dir, who)) as ch:
                    stub = scheduler_pb2_grpc.SchedulerStub(ch)
                    report = scheduler_pb2.ReportBindingOutcomeRequest(binder_id="b")
                    outcome, _ = await call(stub, "ReportBindingOutcome", report)
                    simulate, _ = await call(stub, "Simulate", simulate_request())
                    seen[who] = {"ReportBindingOutcome": outcome, "Simulate": simulate}
        return seen

    seen = run(body())
    assert seen["binder"] == {"ReportBindingOutcome": Code.OK, "Simulate": Code.OK}
    assert seen["ops"] == {"ReportBindingOutcome": Code.PERMISSION_DENIED, "Simulate": Code.OK}


def test_restricted_binder_and_watcher_rpcs_admit_only_the_scheduler(tls_dir: Path) -> None:
    """The guard stands before the servicer: a trusted caller reaches it (here a servicer
    that answers UNIMPLEMENTED, or an empty watcher's stream), an untrusted one does not;
    health and reflection stay open to anyone with a certificate."""

    async def body() -> dict[str, Code]:
        out: dict[str, Code] = {}
        b_args = config.parse_args(
            binder_settings.build_parser(),
            [*mtls_flags(tls_dir, "binder"), "--scheduler", "x:1",
             "--trusted-clients", "splitsched-scheduler"],
            env_prefix="SPLITSCHED_TEST_UNUSED", environ={},
        )  # fmt: skip
        w_args = config.parse_args(
            watcher_settings.build_parser(),
            [*mtls_flags(tls_dir, "watcher"), "--trusted-clients", "splitsched-scheduler"],
            env_prefix="SPLITSCHED_TEST_UNUSED",
            environ={},
        )
        b_sec = security.from_args(b_args, service=binder_settings.SERVICE)
        w_sec = security.from_args(w_args, service=watcher_settings.SERVICE)
        hub = ring.ClusterHub(ring_size=10)
        hub.mark_synced()
        watcher = watcher_server.WatcherService(hub)
        # The generated base class: every RPC answers UNIMPLEMENTED.
        unimplemented = binder_pb2_grpc.BinderServicer()  # type: ignore[abstract]
        servers = [
            await grpcsrv.serve(
                listen="127.0.0.1:0",
                servicers=[(binder_pb2_grpc.add_BinderServicer_to_server, unimplemented)],
                service_names=[binder_settings.SERVICE_NAME],
                tls=b_sec.server, interceptors=b_sec.interceptors,
            ),
            await grpcsrv.serve(
                listen="127.0.0.1:0",
                servicers=[(watcher.add_to_server, watcher)],
                service_names=[watcher_server.SERVICE_NAME],
                tls=w_sec.server, interceptors=w_sec.interceptors,
            ),
        ]  # fmt: skip
        binder_target, watcher_target = (f"127.0.0.1:{s.port}" for s in servers)
        try:
            for who in ("scheduler", "ops"):
                async with dial(binder_target, client(tls_dir, who)) as ch:
                    stub = binder_pb2_grpc.BinderStub(ch)
                    out[f"{who} BindBatch"], _ = await call(
                        stub, "BindBatch", binder_pb2.BindBatchRequest()
                    )
                    out[f"{who} Preempt"], _ = await call(
                        stub, "Preempt", binder_pb2.PreemptRequest()
                    )
                out[f"{who} binder health"] = await health(binder_target, client(tls_dir, who))
                async with dial(watcher_target, client(tls_dir, who)) as ch:
                    stream = watcher_pb2_grpc.WatcherStub(ch).StreamClusterEvents(
                        watcher_pb2.StreamClusterEventsRequest(subscriber=who), timeout=TIMEOUT
                    )
                    try:
                        first = await stream.read()
                        out[f"{who} watch"] = Code.OK if first is not None else Code.UNKNOWN
                    except grpc.aio.AioRpcError as exc:
                        out[f"{who} watch"] = exc.code()
                    stream.cancel()
        finally:
            for s in servers:
                await s.stop(0)
        return out

    assert run(body()) == {
        "scheduler BindBatch": Code.UNIMPLEMENTED,
        "scheduler Preempt": Code.UNIMPLEMENTED,
        "scheduler binder health": Code.OK,
        "scheduler watch": Code.OK,
        "ops BindBatch": Code.PERMISSION_DENIED,
        "ops Preempt": Code.PERMISSION_DENIED,
        "ops binder health": Code.OK,
        "ops watch": Code.PERMISSION_DENIED,
    }
