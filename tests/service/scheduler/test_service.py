"""The scheduler on the service skeleton, in-process with its real servers on 127.0.0.1
port 0 and peers that do not answer: losing the Lease stops the whole service with exit
code 1 (so Kubernetes restarts a clean standby); SIGTERM stops it with 0 after its loops
ended; an unusable kubeconfig for the Lease exits 2 naming the file, before anything
listens."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from pathlib import Path

import pytest

from services.scheduler import main as scheduler_main
from services.scheduler.settings import SchedulerSettings
from splitsched.runtime import service


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_settings(*extra: str) -> SchedulerSettings:
    nowhere = f"127.0.0.1:{closed_port()}"
    argv = ["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"]
    return SchedulerSettings.load(
        [*argv, "--watcher", nowhere, "--binders", nowhere, *extra], environ={}
    )


async def started(svc: scheduler_main.SchedulerService) -> None:
    for _ in range(200):
        if svc.tasks:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the scheduler's loops never started")


async def serve_then(stop_by: str) -> tuple[int, scheduler_main.SchedulerService]:
    settings = local_settings()
    svc = scheduler_main.SchedulerService(settings)
    served = asyncio.create_task(service.serve(svc, settings.common))
    await started(svc)
    if stop_by == "lost lease":
        svc.leadership.stopped_leading()
    else:
        # Never send SIGTERM to the test process unless the skeleton handles it.
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
        os.kill(os.getpid(), signal.SIGTERM)
    code = await asyncio.wait_for(served, 20)
    return code, svc


def test_losing_the_lease_stops_the_service_with_exit_code_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, svc = asyncio.run(serve_then("lost lease"))
    assert code == 1
    assert svc.stopping.is_set() and all(t.done() for t in svc.tasks)
    line = capsys.readouterr().out
    assert line.startswith("splitsched-scheduler listening grpc=127.0.0.1:"), line
    assert f"watcher={svc.settings.watcher} binders={svc.settings.binders}" in line


def test_sigterm_ends_the_loops_and_exits_0(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="splitsched.scheduler")
    code, svc = asyncio.run(serve_then("sigterm"))
    assert code == 0 and svc.leadership.exit_code == 0
    assert all(t.done() for t in svc.tasks)
    assert "shutting down" in caplog.messages


def test_an_unusable_lease_kubeconfig_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = logging.getLogger()  # `main` sets up logging: the root logger is given back after
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    missing = tmp_path / "missing-kubeconfig"
    argv = ["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"]
    code = scheduler_main.main([*argv, "--leader-elect", "--kubeconfig", str(missing)])
    assert code == 2
    captured = capsys.readouterr()
    assert f"error: kubeconfig {missing}: cannot read" in captured.err
    assert "listening" not in captured.out
