"""The scheduler's binder probe logs its first failure, with the gRPC code and details, so a
scheduler that never reaches a binder (a wrong address, a TLS name mismatch) does not sit
unready without a word; then it logs only changes.

Runs `SchedulerService.binder_probe_loop` in-process against a port nothing listens on.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from services.scheduler import dispatch
from services.scheduler import main as scheduler_main
from services.scheduler.settings import SchedulerSettings


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def probe_twice(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    binders = f"127.0.0.1:{closed_port()}"
    settings = SchedulerSettings.load(["--binders", binders], environ={})
    svc = scheduler_main.SchedulerService(settings)
    await svc.open()
    task = asyncio.create_task(svc.binder_probe_loop())
    try:
        for _ in range(200):  # the first round's failure (up to 10 s), or none
            if any("no binder SERVING" in r.getMessage() for r in caplog.records):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(dispatch.BINDER_PROBE_SECONDS + 0.5)  # one more round
    finally:
        svc.stopping.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await svc.dispatch.close()
    assert not svc.binders_ok
    return [r for r in caplog.records if "binder" in r.getMessage()]


def test_first_probe_failure_is_logged_once_with_code_and_details(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="services.scheduler.main")
    records = asyncio.run(probe_twice(caplog))
    failures = [r for r in records if "no binder SERVING" in r.getMessage()]
    assert len(failures) == 1, [r.getMessage() for r in records]
    message = failures[0].getMessage()
    assert failures[0].levelno == logging.WARNING
    assert "UNAVAILABLE: " in message, message
    # The details say why (gRPC's own text about the failed connection), not just the code.
    assert len(message.split("UNAVAILABLE: ", 1)[1].strip(") ")) > 0, message
