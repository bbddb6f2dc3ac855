"""The services as local processes: how one is started (`service_argv`, with its TLS flags
from `tls_args`), waited for (`wait_ready` on its /readyz) and stopped (`stop`: SIGTERM,
then SIGKILL after a grace period), each logging to its own file.

Every process runs through `splitsched.launch.orphanguard`, so it dies with the process
that started it even when that one is killed. Callers: `splitsched up`
(`splitsched.up.run`) and the test stack (`splitsched.testing.stack`).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: With mutual TLS: the identities allowed to call each server's restricted RPCs (the
#: CLI's certificate is `splitsched-ops`: Simulate only).
TRUSTED_CLIENTS = {
    "watcher": "splitsched-scheduler",
    "binder": "splitsched-scheduler",
    "scheduler": "splitsched-binder,Simulate=splitsched-ops",
}

_PORT_PICKER = random.Random()
_HANDED_OUT: set[int] = set()


def free_port(*, preferred: int = 0) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now: ``preferred`` if it is
    free (the demo's scheduler takes the documented 50050 so), else one chosen below
    Linux's ephemeral range (32768 and up): a port the kernel picks for some outgoing
    connection could otherwise be taken between this check and the service binding it."""
    candidates = [preferred] if preferred else []
    candidates += [_PORT_PICKER.randrange(20000, 32000) for _ in range(100)]
    for port in candidates:
        if port not in _HANDED_OUT and _bindable(port):
            _HANDED_OUT.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        fallback: int = s.getsockname()[1]
        return fallback


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class Service:
    """One service process: its command line, log file and loopback ports."""

    name: str
    argv: list[str]
    log_path: Path
    grpc_port: int
    http_port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def ready(self) -> bool:
        """/readyz answers 200: the service does its job (a standby scheduler does not)."""
        return self._answers_ok("/readyz")

    def live(self) -> bool:
        """/healthz answers: the process serves (a standby scheduler is live, not ready)."""
        return self._answers_ok("/healthz")

    def _answers_ok(self, path: str) -> bool:
        try:
            with urllib.request.urlopen(f"{self.http_url}{path}", timeout=1) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def metrics(self) -> str:
        with urllib.request.urlopen(f"{self.http_url}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def tls_args(component: str, tls_dir: Path | None) -> list[str]:
    """The TLS and trusted-client flags of ``component`` (watcher, scheduler, binder) with
    the certificates `certs.write_stack_certs` wrote to ``tls_dir``; none when None."""
    if tls_dir is None:
        return []
    ca = str(tls_dir / "ca.crt")
    crt, key = (str(tls_dir / f"{component}.{ext}") for ext in ("crt", "key"))
    argv = ["--tls-cert", crt, "--tls-key", key, "--tls-ca", ca, "--tls-client-auth"]
    argv += ["--trusted-clients", TRUSTED_CLIENTS[component]]
    if component != "watcher":  # the watcher dials no gRPC peer
        argv += ["--peer-tls-ca", ca, "--peer-tls-cert", crt, "--peer-tls-key", key]
        # An `ipv4:a,b` target has no host name to check: the certificates name localhost.
        argv += ["--peer-server-name", "localhost"]
    return argv


def service_argv(
    module: str, *, listen: str, http_port: int, args: Sequence[str] = ()
) -> list[str]:
    """``python -m MODULE`` through orphanguard, serving gRPC on ``listen`` and HTTP on
    loopback ``http_port``, then ``args``."""
    return [
        sys.executable,
        "-m",
        "splitsched.launch.orphanguard",  # dies with us; see that module for why
        module,
        "--listen",
        listen,
        "--http-listen",
        f"127.0.0.1:{http_port}",
        *args,
    ]


def start(
    svc: Service,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    new_session: bool = False,
    append: bool = False,
) -> Service:
    """Start ``svc`` with the current environment plus ``env``, output to its log file,
    begun afresh (a kept state dir's old log would name dead ports first) unless
    ``append`` (a restart); with ``new_session``, out of the terminal's reach (Ctrl-C there
    signals only its parent, which stops the services in its own order)."""
    svc.log_path.parent.mkdir(parents=True, exist_ok=True)
    log = svc.log_path.open("ab" if append else "wb")
    try:
        svc.proc = subprocess.Popen(
            svc.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            cwd=cwd,
            start_new_session=new_session,
        )
    finally:
        log.close()
    return svc


def wait_ready(svcs: Sequence[Service], *, timeout: float) -> None:
    """Return once every service answers /readyz; RuntimeError with its log's tail when
    one exits or is not ready in time."""
    deadline = time.monotonic() + timeout
    for svc in svcs:
        while not svc.ready():
            if not svc.alive():
                raise RuntimeError(f"{svc.name} exited early:\n{svc.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{svc.name} not ready after {timeout}s:\n{svc.log_tail()}")
            time.sleep(0.1)


def stop(svcs: Sequence[Service], *, grace: float = 15.0) -> None:
    """SIGTERM every running service, last started first; SIGKILL what is still running
    after ``grace`` seconds. Returns once every process has exited."""
    for svc in reversed(svcs):
        if svc.alive():
            assert svc.proc is not None
            svc.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for svc in svcs:
        if svc.proc is None:
            continue
        try:
            svc.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            svc.proc.kill()
            svc.proc.wait(timeout=5)
