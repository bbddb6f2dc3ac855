"""How every service runs its asyncio main: on uvloop when it is installed (the default
install has it), else on the standard loop. ``SPLITSCHED_EVENT_LOOP=asyncio`` forces the
standard loop, to compare or to rule uvloop out when debugging.

Each service's ``main`` runs its coroutine through `run_service` (the watcher, binder and
scheduler ``main.py``): tracing set up and flushed around it, exit codes for errors.

Why: a binder spends a fifth of its CPU in TLS and another tenth in aiohttp's transport, and
the watcher and the scheduler move every event through the loop; uvloop's transports and
its TLS layer are C (Cython) where asyncio's are Python.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from splitsched.runtime import config, tracing

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


def run_service(
    component: str,
    main: Coroutine[Any, Any, int],
    *,
    errors: tuple[type[Exception], ...] = (config.ConfigError,),
) -> int:
    """Run a service's main coroutine with tracing set up (and its spans flushed at the
    end): exit 2 with the message on one of `errors` (bad configuration), 130 on Ctrl-C."""
    tracing.setup(component)
    try:
        return run(main)
    except errors as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        tracing.shutdown()
