"""`splitsched up` as a user runs it, for the integration tests: a subprocess whose output
is collected line by line, the processes it started, the CLI settings it wrote, and a
kubeconfig whose current context is broken so that ``--context`` must pick the good one.

Shared by tests/integration/test_up.py and tests/integration/test_kubectl_plugin.py.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client

from splitsched.launch.processes import free_port
from splitsched.testing import controlplane, kube

#: What `up` prints last once every service is ready.
READY_LINE = "Ctrl-C stops everything."


@dataclass
class UpRun:
    """One running ``splitsched up`` and everything it printed so far."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    #: Reads the output into `lines` until `up` closes it.
    reader: threading.Thread | None = None

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, *, timeout: float) -> None:
        """Until a line holds ``text``; AssertionError with the output if `up` exits or
        the time runs out first."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                time.sleep(0.2)  # the reader's last lines
                raise AssertionError(f"no {text!r} from splitsched up:\n{self.output}")
            time.sleep(0.1)

    def children(self) -> list[int]:
        """The processes `up` started (its main thread's children)."""
        pid = self.proc.pid
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(p) for p in text.split()]

    def stop(self, *, timeout: float = 60.0) -> int:
        """SIGTERM, as a process manager stops it; its exit code, once `lines` holds all
        it printed."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        if self.reader is not None:
            self.reader.join(timeout=10)
        return code


@contextlib.contextmanager
def up_process(argv: Sequence[str], *, env: dict[str, str] | None = None) -> Iterator[UpRun]:
    """``python -m splitsched.cli up ARGV``; killed on the way out if still running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "splitsched.cli", "up", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=controlplane.REPO_ROOT,
    )
    run = UpRun(proc)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            run.lines.append(line.rstrip("\n"))

    run.reader = threading.Thread(target=read, daemon=True)
    run.reader.start()
    try:
        yield run
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def cli_env(state_dir: Path) -> dict[str, str]:
    """The variables `up`'s ``cli.env`` exports (what ``. cli.env`` would set)."""
    env = {}
    for line in (state_dir / "cli.env").read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = shlex.split(value)[0]
    return env


def with_broken_current_context(
    admin: Path, directory: Path, *, good: str = "admin", namespace: str | None = None
) -> Path:
    """A copy of the admin kubeconfig whose current context reaches no server and whose
    context ``good`` is the admin's (in ``namespace``, if given)."""
    doc = yaml.safe_load(admin.read_text())
    admin_context = doc["contexts"][0]["context"]
    if namespace:
        admin_context = {**admin_context, "namespace": namespace}
    doc["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}})
    doc["contexts"] = [
        {"name": "broken", "context": {"cluster": "nowhere", "user": admin_context["user"]}},
        {"name": good, "context": admin_context},
    ]
    doc["current-context"] = "broken"
    path = directory / "two-contexts.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class UpSession:
    """A ready `up` on the admin's context, and what it runs on."""

    run: UpRun
    kubeconfig: Path
    state: Path
    #: kwok nodes labelled ``label=<namespace>``, for the test's pods to select.
    nodes: list[str]


@contextlib.contextmanager
def up_on_admin_context(
    admin: Path,
    kube_api: client.ApiClient,
    *,
    namespace: str,
    directory: Path,
    label: str,
    nodes: int = 1,
    context_namespace: str | None = None,
    extra: Sequence[str] = (),
) -> Iterator[UpSession]:
    """`splitsched up --context admin [EXTRA]` past a broken current context
    (`with_broken_current_context`), on a free port, once ready; with ``nodes`` kwok nodes
    labelled ``label=namespace``, deleted on the way out."""
    kubeconfig = with_broken_current_context(admin, directory, namespace=context_namespace)
    state = directory / "state"
    names = kube.create_kwok_nodes(
        kube_api, nodes, name_prefix=f"{namespace}-n", labels={label: namespace}
    )
    argv = ["--kubeconfig", str(kubeconfig), "--context", "admin", "--state-dir", str(state)]
    try:
        with up_process([*argv, "--listen", f"127.0.0.1:{free_port()}", *extra]) as run:
            run.wait_for(READY_LINE, timeout=120)
            yield UpSession(run, kubeconfig, state, names)
    finally:
        kube.delete_nodes(kube_api, names)
