"""How every service runs its asyncio main: on uvloop when it is installed (the default
install has it), else on the standard loop. ``SPLITSCHED_EVENT_LOOP=asyncio`` forces the
standard loop, to compare or to rule uvloop out when debugging.

Why: a binder spends a fifth of its CPU in TLS and another tenth in aiohttp's transport, and
the watcher and the scheduler move every event through the loop; uvloop's transports and
its TLS layer are C (Cython) where asyncio's are Python.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

ENV = "SPLITSCHED_EVENT_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for the standard loop (asked for, or not installed)."""
    choice = os.environ.get(ENV, "uvloop").strip().lower()
    if choice == "asyncio":
        return None
    if choice != "uvloop":
        raise ValueError(f"{ENV}={choice!r}: expected 'uvloop' or 'asyncio'")
    try:
        import uvloop
    except ImportError:
        log.info("uvloop is not installed: using the standard asyncio event loop")
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
