"""The control plane's processes as files: each named process has a PID file and a log in
one directory, so ``down`` (even from another Python process, ``make cluster-down``) stops
exactly what ``up`` started and never a stranger that reused a PID.

Also the small process and port helpers the stack, the tests and the benchmarks share
(``free_port``, ``pid_alive``, ``die_with_parent``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# free_port lives in splitsched.launch, where `splitsched up` finds it too.
from splitsched.launch.processes import free_port as free_port
from splitsched.testing.controlplane.state import ControlPlaneError


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def pid_cmdline(pid: int) -> list[str]:
    """The argv of a running process (empty when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def die_with_parent() -> None:
    """preexec_fn: SIGKILL the child when the process that started it dies (Linux).

    SIGKILL, not SIGTERM: all three die at once, and a kube-apiserver whose etcd vanished
    hangs in graceful shutdown. The state is throwaway anyway.
    """
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def reap(pid: int) -> None:
    """Collect ``pid`` if it is our child (so it does not linger as a zombie)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def stop_pid(pid: int, *, timeout: float) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; returns once the process is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap(pid)
        if not pid_alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while pid_alive(pid):
        reap(pid)
        time.sleep(0.05)


@dataclass(frozen=True)
class ProcessFiles:
    """PID files (``<dir>/<name>.pid``) and logs (``<dir>/logs/<name>.log``) of named
    processes started in ``directory``."""

    directory: Path
    #: Children get SIGKILL when this Python process dies (for test fixtures).
    die_with_parent: bool = False

    def log_path(self, name: str) -> Path:
        return self.directory / "logs" / f"{name}.log"

    def clear_logs(self) -> None:
        """Forget earlier runs' logs before a fresh start: ``spawn`` appends (a restarted
        component keeps its history), so an old log would show dead ports first."""
        for log in (self.directory / "logs").glob("*.log"):
            log.unlink()

    def pid_path(self, name: str) -> Path:
        return self.directory / f"{name}.pid"

    def read_pid(self, name: str) -> int | None:
        try:
            return int(self.pid_path(name).read_text().strip())
        except (OSError, ValueError):
            return None

    def running_pid(self, name: str) -> int | None:
        """The recorded PID of ``name`` if that process still runs our binary."""
        pid = self.read_pid(name)
        if pid is None or not pid_alive(pid):
            return None
        argv = pid_cmdline(pid)
        if not argv or Path(argv[0]).name != name:
            return None  # the PID was reused by something else
        return pid

    def spawn(self, name: str, argv: Sequence[str]) -> int:
        """Start ``argv`` in its own session, logging to ``log_path(name)``; returns the PID
        (also written to ``pid_path(name)``)."""
        log = self.log_path(name).open("ab")
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=True,
                preexec_fn=die_with_parent if self.die_with_parent else None,
            )
        finally:
            log.close()
        self.pid_path(name).write_text(f"{proc.pid}\n")
        return proc.pid

    def wait_ready(
        self, name: str, pid: int, check: Callable[[], bool], *, deadline: float
    ) -> None:
        """Poll ``check`` until it passes; fail with the log's tail if the process exits
        first or the deadline passes."""
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                reap(pid)
                raise ControlPlaneError(
                    f"{name} exited during startup; last log lines:\n{self.tail(name)}"
                )
            if check():
                return
            time.sleep(0.25)
        raise ControlPlaneError(f"{name} not ready in time; last log lines:\n{self.tail(name)}")

    def tail(self, name: str, lines: int = 30) -> str:
        try:
            text = self.log_path(name).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, name: str, *, timeout: float) -> bool:
        """Stop ``name`` if it runs and forget its PID file; True if it was running."""
        pid = self.running_pid(name)
        if pid is not None:
            stop_pid(pid, timeout=timeout)
        elif (recorded := self.read_pid(name)) is not None:
            reap(recorded)  # an exited child of ours must not linger as a zombie
        self.pid_path(name).unlink(missing_ok=True)
        return pid is not None
