"""The services' event-loop choice: uvloop by default, the standard loop on request."""

from __future__ import annotations

import asyncio

import pytest

from splitsched.runtime import eventloop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_services_run_on_uvloop_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(eventloop.ENV, raising=False)
    assert eventloop.run(_loop_module()).startswith("uvloop")


def test_standard_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(eventloop.ENV, "asyncio")
    assert eventloop.run(_loop_module()).startswith("asyncio")


def test_unknown_choice_is_an_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(eventloop.ENV, "trio")
    with pytest.raises(ValueError, match="SPLITSCHED_EVENT_LOOP='trio'"):
        eventloop.loop_factory()
