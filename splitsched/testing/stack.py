"""Run the three splitsched services as real processes: for e2e tests, the demo and the
benchmarks.

`Stack` starts one watcher, N binders and one scheduler on free loopback ports, each with
its own least-privilege kubeconfig (`component_kubeconfigs` makes them with exactly the
RBAC rules the Helm chart grants), waits until each reports ready on /readyz, and stops
exactly what it started. Logs go to files in the stack's work dir.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from kubernetes import client

from splitsched.testing import controlplane, kube

# The rights each component needs, and nothing more. The Helm chart grants the same.
WATCHER_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": ["policy"],
        "resources": ["poddisruptionbudgets"],
        "verbs": ["get", "list", "watch"],
    },
)
BINDER_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
)


def component_kubeconfigs(
    admin_api: client.ApiClient, *, namespace: str, directory: Path
) -> dict[str, Path]:
    """ServiceAccounts for the watcher and the binder with their exact rights (the
    scheduler needs none: it never talks to the API server)."""
    return {
        "watcher": kube.service_account_kubeconfig(
            admin_api,
            namespace=namespace,
            name="splitsched-watcher",
            cluster_role_rules=WATCHER_RULES,
            directory=directory,
        ),
        "binder": kube.service_account_kubeconfig(
            admin_api,
            namespace=namespace,
            name="splitsched-binder",
            cluster_role_rules=BINDER_RULES,
            directory=directory,
        ),
    }


@dataclass
class Service:
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
        try:
            with urllib.request.urlopen(f"{self.http_url}/readyz", timeout=1) as resp:
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


@dataclass
class Stack:
    workdir: Path
    watcher_kubeconfig: Path
    binder_kubeconfig: Path
    binders: int = 2
    scheduler_args: Sequence[str] = ()
    binder_args: Sequence[str] = ()
    watcher_args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)

    def _service(self, name: str, module: str, args: Sequence[str]) -> Service:
        grpc_port, http_port = controlplane.free_port(), controlplane.free_port()
        argv = [
            sys.executable,
            "-m",
            module,
            "--listen",
            f"127.0.0.1:{grpc_port}",
            "--http-listen",
            f"127.0.0.1:{http_port}",
            *args,
        ]
        return Service(name, argv, self.workdir / f"{name}.log", grpc_port, http_port)

    def _start(self, svc: Service) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        log = svc.log_path.open("ab")
        svc.proc = subprocess.Popen(
            svc.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=controlplane.REPO_ROOT,
            preexec_fn=controlplane._die_with_parent,
        )
        log.close()
        self.services.append(svc)

    def _wait_ready(self, svcs: Sequence[Service], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for svc in svcs:
            while not svc.ready():
                if not svc.alive():
                    raise RuntimeError(f"{svc.name} exited early:\n{svc.log_tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{svc.name} not ready after {timeout}s:\n{svc.log_tail()}")
                time.sleep(0.1)

    @property
    def watcher(self) -> Service:
        return next(s for s in self.services if s.name == "watcher")

    @property
    def scheduler(self) -> Service:
        return next(s for s in self.services if s.name == "scheduler")

    @property
    def binder_services(self) -> list[Service]:
        return [s for s in self.services if s.name.startswith("binder")]

    def start(self, *, timeout: float = 60.0) -> Stack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            watcher = self._service(
                "watcher",
                "services.watcher",
                ["--kubeconfig", str(self.watcher_kubeconfig), *self.watcher_args],
            )
            self._start(watcher)
            scheduler_grpc = controlplane.free_port()
            binders = []
            for i in range(self.binders):
                b = self._service(
                    f"binder-{i}",
                    "services.binder",
                    [
                        "--kubeconfig",
                        str(self.binder_kubeconfig),
                        "--scheduler",
                        f"127.0.0.1:{scheduler_grpc}",
                        "--binder-id",
                        f"binder-{i}",
                        *self.binder_args,
                    ],
                )
                self._start(b)
                binders.append(b)
            targets = ",".join(f"127.0.0.1:{b.grpc_port}" for b in binders)
            scheduler = self._service(
                "scheduler",
                "services.scheduler",
                [
                    "--watcher",
                    watcher.grpc_target,
                    "--binders",
                    f"ipv4:{targets}",
                    "--scheduler-id",
                    "scheduler-0",
                    *self.scheduler_args,
                ],
            )
            scheduler.grpc_port = scheduler_grpc
            scheduler.argv[scheduler.argv.index("--listen") + 1] = f"127.0.0.1:{scheduler_grpc}"
            self._start(scheduler)
            self._wait_ready([watcher, *binders, scheduler], timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, *, grace: float = 15.0) -> None:
        for svc in reversed(self.services):
            if svc.alive():
                assert svc.proc is not None
                svc.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for svc in self.services:
            if svc.proc is None:
                continue
            try:
                svc.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                svc.proc.kill()
                svc.proc.wait(timeout=5)
        self.services.clear()

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
