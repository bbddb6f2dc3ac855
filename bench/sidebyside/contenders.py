"""The contenders: kube-scheduler (the same Kubernetes version) and splitsched's services.

Called by ``bench.sidebyside.runner``, which starts one contender, measures it and stops it
before the next. Each contender schedules only pods with its own ``schedulerName``:

* ``kube-scheduler`` -- the cached v1.36.3 binary (``controlplane.binary_path``), admin
  kubeconfig, leader election off, one profile ``bench-kube``, client QPS/burst 5000 (as
  scheduler_perf runs it), kube's default ``percentageOfNodesToScore`` (adaptive).
* ``kube-scheduler-defaults`` -- the same at the client defaults (QPS 50, burst 100).
* ``kube-scheduler-score-all`` -- QPS 5000 and ``percentageOfNodesToScore: 100`` (it then
  scores every feasible node, as splitsched always does). Not in the default set.
* ``ceiling`` -- no scheduler: Bindings to the next node in turn and their Events, as
  fast as the API server takes them (``bench.sidebyside.ceiling``); basic workload only.
* ``splitsched-N`` -- ``splitsched.testing.stack.Stack`` with N binders, each component with
  its least-privilege ServiceAccount kubeconfig; pods with ``schedulerName: splitsched``.
"""

from __future__ import annotations

import abc
import re
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from bench.sidebyside import ceiling
from splitsched.testing import controlplane, kube, stack

KUBE_SCHEDULER_NAME = "bench-kube"
SPLITSCHED_NAME = kube.DEFAULT_SCHEDULER_NAME
DEFAULT_CONTENDERS = (
    "kube-scheduler",
    "kube-scheduler-defaults",
    "splitsched-1",
    "splitsched-2",
    "splitsched-4",
)


class Contender(abc.ABC):
    """Something that schedules pods addressed to ``scheduler_name``."""

    name: str
    scheduler_name: str
    family: str  # "kube-scheduler" or "splitsched"

    @abc.abstractmethod
    def start(self, *, timeout: float = 120.0) -> None:
        """Start and return once ready to schedule (the measurement starts after this)."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop every process this contender started."""

    @abc.abstractmethod
    def pids(self) -> dict[str, int]:
        """Process name -> PID, for CPU accounting and profiling."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """What exactly ran (recorded in the result JSON)."""

    def log_tail(self) -> str:
        return ""


class OneProcess(Contender):
    """A contender that is one process (``proc``), logging to ``log_path``."""

    process_name: str
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def pids(self) -> dict[str, int]:
        return {self.process_name: self.proc.pid} if self.proc else {}

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return ""

    def _spawn(self, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=controlplane.die_with_parent,
            )  # fmt: skip
        return self.proc


class KubeScheduler(OneProcess):
    family = "kube-scheduler"
    process_name = "kube-scheduler"

    def __init__(
        self,
        name: str,
        *,
        kubeconfig: Path,
        workdir: Path,
        qps: float | None,
        burst: int | None,
        percentage_of_nodes_to_score: int | None = None,
    ) -> None:
        self.name = name
        self.scheduler_name = KUBE_SCHEDULER_NAME
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.qps = qps
        self.burst = burst
        self.percentage = percentage_of_nodes_to_score
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def config(self) -> dict[str, Any]:
        """The KubeSchedulerConfiguration this contender runs with."""
        connection: dict[str, Any] = {"kubeconfig": str(self.kubeconfig)}
        if self.qps is not None:
            connection["qps"] = self.qps
        if self.burst is not None:
            connection["burst"] = self.burst
        conf: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": connection,
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": self.scheduler_name}],
        }
        if self.percentage is not None:
            conf["percentageOfNodesToScore"] = self.percentage
        return conf

    def start(self, *, timeout: float = 120.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config_path = self.workdir / f"{self.name}.yaml"
        config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        self.port = controlplane.free_port()
        argv = [
            str(controlplane.binary_path("kube-scheduler")),
            f"--config={config_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--v=1",
        ]
        proc = self._spawn(argv)
        # /readyz is on the always-allowed paths and turns ok once the informers synced.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"kube-scheduler exited early:\n{self.log_tail()}")
            try:
                url = f"https://127.0.0.1:{self.port}/readyz"
                with urllib.request.urlopen(url, timeout=1, context=ctx) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"kube-scheduler not ready in {timeout}s:\n{self.log_tail()}")
            time.sleep(0.05)

    def describe(self) -> dict[str, Any]:
        conf = self.config()
        conf["clientConnection"].pop("kubeconfig", None)
        return {
            "binary": "kube-scheduler",
            "version": controlplane.binary_versions()["kube-scheduler"],
            "config": conf,
            "client_qps_burst": [self.qps or 50, self.burst or 100],
            "percentage_of_nodes_to_score": self.percentage or "default (adaptive)",
        }


class Ceiling(OneProcess):
    """``bench.sidebyside.ceiling``: Bindings and Events with no scheduling at all."""

    family = "ceiling"
    process_name = "ceiling"

    def __init__(self, *, kubeconfig: Path, workdir: Path) -> None:
        self.name = ceiling.NAME
        self.scheduler_name = ceiling.SCHEDULER_NAME
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.proc = None

    def start(self, *, timeout: float = 120.0) -> None:
        proc = self._spawn(ceiling.argv(self.kubeconfig, scheduler_name=self.scheduler_name))
        deadline = time.monotonic() + timeout
        while "ready:" not in self.log_path.read_text(errors="replace"):
            if proc.poll() is not None:
                raise RuntimeError(f"the ceiling client exited early:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the ceiling client not ready in {timeout}s")
            time.sleep(0.05)

    def describe(self) -> dict[str, Any]:
        return {
            "binary": "bench/ceiling (Go standard library, HTTP/2)",
            "workers": ceiling.WORKERS,
            "does": "each pod's Binding to the next node in turn, then its Scheduled Event",
        }


class Splitsched(Contender):
    family = "splitsched"

    def __init__(
        self, name: str, *, binders: int, admin_api: client.ApiClient, workdir: Path
    ) -> None:
        self.name = name
        self.scheduler_name = SPLITSCHED_NAME
        self.binders = binders
        self.admin_api = admin_api
        self.workdir = workdir
        self.stack: stack.Stack | None = None
        self.sa_namespace: str | None = None

    def start(self, *, timeout: float = 120.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.sa_namespace = kube.create_namespace(self.admin_api, prefix="bench-sa")
        configs = stack.component_kubeconfigs(
            self.admin_api, namespace=self.sa_namespace, directory=self.workdir
        )
        self.stack = stack.Stack(
            workdir=self.workdir,
            watcher_kubeconfig=configs["watcher"],
            binder_kubeconfig=configs["binder"],
            binders=self.binders,
        )
        try:
            self.stack.start(timeout=timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.stack is not None:
            self.stack.stop()
            self.stack = None
        if self.sa_namespace is not None:
            kube.delete_namespace(self.admin_api, self.sa_namespace)
            self.sa_namespace = None

    def pids(self) -> dict[str, int]:
        if self.stack is None:
            return {}
        return {s.name: s.proc.pid for s in self.stack.services if s.proc is not None}

    def describe(self) -> dict[str, Any]:
        return {
            "services": ["watcher", "scheduler", *(f"binder-{i}" for i in range(self.binders))],
            "binders": self.binders,
            "scores": "every feasible node (no percentageOfNodesToScore)",
            "kubeconfigs": "least-privilege ServiceAccounts (stack.component_kubeconfigs)",
        }

    def log_tail(self) -> str:
        if self.stack is None:
            return ""
        return "\n".join(f"--- {s.name}\n{s.log_tail(15)}" for s in self.stack.services)


def validate(names: Sequence[str]) -> None:
    """ValueError unless every name is a known contender."""
    for name in names:
        if name not in (*_KUBE, ceiling.NAME) and not re.fullmatch(r"splitsched-[1-9]\d*", name):
            raise ValueError(
                f"unknown contender {name!r}: {', '.join(_KUBE)}, {ceiling.NAME} or "
                "splitsched-<binders>"
            )


_KUBE = ("kube-scheduler", "kube-scheduler-defaults", "kube-scheduler-score-all")


def make(name: str, *, kubeconfig: Path, admin_api: client.ApiClient, workdir: Path) -> Contender:
    """The contender called ``name`` (see the module docstring); ValueError if unknown."""
    cdir = workdir / name
    if name == "kube-scheduler":
        return KubeScheduler(name, kubeconfig=kubeconfig, workdir=cdir, qps=5000, burst=5000)
    if name == "kube-scheduler-defaults":
        return KubeScheduler(name, kubeconfig=kubeconfig, workdir=cdir, qps=None, burst=None)
    if name == "kube-scheduler-score-all":
        return KubeScheduler(
            name,
            kubeconfig=kubeconfig,
            workdir=cdir,
            qps=5000,
            burst=5000,
            percentage_of_nodes_to_score=100,
        )
    if name == ceiling.NAME:
        return Ceiling(kubeconfig=kubeconfig, workdir=cdir)
    if m := re.fullmatch(r"splitsched-(\d+)", name):
        return Splitsched(name, binders=int(m.group(1)), admin_api=admin_api, workdir=cdir)
    validate([name])
    raise ValueError(name)


def kube_nodes_scored(nodes: int, percentage: int | None = None) -> int:
    """How many nodes kube-scheduler scores per pod (``numFeasibleNodesToFind``).

    At the default (adaptive) setting: all of them below 100 nodes, otherwise
    ``50 - nodes/125`` percent (at least 5%), and never fewer than 100.
    """
    min_feasible = 100
    if nodes < min_feasible or percentage == 100:
        return nodes
    pct = percentage if percentage else max(5, 50 - nodes // 125)
    return max(min_feasible, nodes * pct // 100)
