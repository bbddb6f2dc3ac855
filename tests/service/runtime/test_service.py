"""The service skeleton (`splitsched.runtime.service`) drives a service in one order: open,
servers up, start, the listening line, then on SIGTERM (or the service's own stop) health
NOT_SERVING, drain, servers down, close; and `main` maps errors to exit codes.

A `FakeService` records each step and what it saw of the servers at that moment; the
servers are the real ones on 127.0.0.1 port 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from splitsched.runtime import config, security, service
from splitsched.runtime import settings as shared

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
LOCAL = shared.Common(
    serving=shared.Serving(listen="127.0.0.1:0", http_listen="127.0.0.1:0"),
    logging=shared.Logging(),
    security=security.Security(),
)


async def health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        answer = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
    return int(answer.status)


async def http_status(address: str, path: str) -> int:
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    status_line = await reader.readline()
    writer.close()
    return int(status_line.split()[1])


def listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) == 0


@dataclass
class FakeService:
    """Records the skeleton's calls; `stop_by` says how the run ends: "sigterm" (the
    process is sent SIGTERM), "self" (the service asks, as a scheduler that lost its
    Lease does) or "fail" (start raises)."""

    stop_by: str = "sigterm"
    exit_code: int = 0
    calls: list[str] = field(default_factory=list)
    seen: dict[str, object] = field(default_factory=dict)
    running: service.Running | None = None

    async def open(self) -> service.Exposed:
        self.calls.append("open")
        return service.Exposed(
            servicers=[],
            service_names=["test.v1.Fake"],
            metrics=CollectorRegistry(),
            ready=lambda: True,
            grace=0.1,
        )

    async def start(self, running: service.Running) -> None:
        self.calls.append("start")
        self.running = running
        self.seen["health at start"] = await health(running.grpc_address)
        self.seen["readyz"] = await http_status(running.http_address, "/readyz")
        await running.grpc.set_serving(True)
        if self.stop_by == "fail":
            raise RuntimeError("start failed")
        if self.stop_by == "self":
            running.stop()
        else:
            # Never send SIGTERM to the test process unless the skeleton handles it.
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
            asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGTERM)

    def describe(self, running: service.Running) -> str:
        self.calls.append("describe")
        return f"fake listening grpc={running.grpc_address} http={running.http_address}"

    async def drain(self) -> None:
        self.calls.append("drain")
        assert self.running is not None
        self.seen["stopping at drain"] = self.running.stopping()
        self.seen["health at drain"] = await health(self.running.grpc_address)
        self.seen["http at drain"] = listening(self.running.http_address)

    async def close(self) -> int:
        self.calls.append("close")
        assert self.running is not None
        self.seen["grpc at close"] = listening(self.running.grpc_address)
        self.seen["http at close"] = listening(self.running.http_address)
        return self.exit_code


def run(fake: FakeService) -> int:
    return asyncio.run(asyncio.wait_for(service.serve(fake, LOCAL), 20))


def test_sigterm_drains_with_health_not_serving_then_stops_servers_then_closes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = FakeService(exit_code=0)
    assert run(fake) == 0
    assert fake.calls == ["open", "start", "describe", "drain", "close"]
    assert fake.seen == {
        "health at start": NOT_SERVING,  # until the service says it serves
        "readyz": 200,
        "stopping at drain": True,
        "health at drain": NOT_SERVING,  # set by the skeleton before the drain
        "http at drain": True,  # probes still answer while draining
        "grpc at close": False,
        "http at close": False,
    }
    assert capsys.readouterr().out.startswith("fake listening grpc=127.0.0.1:")


def test_the_service_may_stop_itself_and_its_exit_code_is_returned() -> None:
    fake = FakeService(stop_by="self", exit_code=3)
    assert run(fake) == 3
    assert fake.calls == ["open", "start", "describe", "drain", "close"]
    assert fake.seen["health at drain"] == NOT_SERVING


def test_signal_handling_ends_with_the_run() -> None:
    """Inside the same event loop (closing a loop would drop its handlers anyway)."""

    async def body() -> object:
        await service.serve(FakeService(), LOCAL)
        return signal.getsignal(signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    assert asyncio.run(asyncio.wait_for(body(), 20)) == before


def test_a_failed_start_still_stops_the_servers_and_closes() -> None:
    fake = FakeService(stop_by="fail")
    with pytest.raises(RuntimeError, match="start failed"):
        run(fake)
    assert fake.calls == ["open", "start", "close"]
    assert fake.seen["grpc at close"] is False and fake.seen["http at close"] is False


def test_open_may_end_the_run_with_an_exit_code() -> None:
    class CannotStart(FakeService):
        async def open(self) -> service.Exposed:
            self.calls.append("open")
            raise service.StartupFailed(2)

    fake = CannotStart()
    assert run(fake) == 2
    assert fake.calls == ["open"]


@dataclass(frozen=True)
class FakeSettings:
    common: shared.Common


@pytest.fixture
def root_logging() -> Iterator[None]:
    """`main` sets up logging for the process: give the root logger back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_main_exits_2_naming_the_problem_when_settings_cannot_be_loaded(
    capsys: pytest.CaptureFixture[str], root_logging: None
) -> None:
    def load() -> FakeSettings:
        raise config.ConfigError("--workers must be at least 1, got 0")

    async def never(_: FakeSettings) -> int:
        raise AssertionError("not served")

    assert service.main("fake", load=load, serve=never) == 2
    assert capsys.readouterr().err == "error: --workers must be at least 1, got 0\n"


def test_main_serves_the_loaded_settings_and_maps_late_config_errors_to_2(
    capsys: pytest.CaptureFixture[str], root_logging: None
) -> None:
    served: list[FakeSettings] = []

    async def ok(settings: FakeSettings) -> int:
        served.append(settings)
        return 0

    async def bad(_: FakeSettings) -> int:
        raise config.ConfigError("kubeconfig /nope: cannot read")

    settings = FakeSettings(common=LOCAL)
    assert service.main("fake", load=lambda: settings, serve=ok) == 0
    assert served == [settings]
    assert service.main("fake", load=lambda: settings, serve=bad) == 2
    assert "error: kubeconfig /nope: cannot read" in capsys.readouterr().err
