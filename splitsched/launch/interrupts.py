"""SIGTERM stops a command as Ctrl-C does.

A command that starts processes (``splitsched up``, the demo, the control plane's ``up``,
the benchmarks) stops them in ``finally`` blocks and context managers, which run on
KeyboardInterrupt. Python's default SIGTERM handling runs none of them: the command dies
and what it started (services, etcd, kube-apiserver, kwok) lives on. `stop_like_ctrl_c`
makes the first SIGTERM raise KeyboardInterrupt too, and ignores further ones so that a
process manager's repeated SIGTERM does not cut the clean-up short (SIGKILL still does).
It also gives SIGINT back its default handler: a shell starts background jobs with SIGINT
ignored.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


def stop_like_ctrl_c() -> None:
    """Install the handlers (main thread only; a no-op elsewhere, as signals are)."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, _interrupt_once)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupt_once(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
