"""A real binder process for the binder's integration tests, reporting to a fake Scheduler.

Used by `tests/integration/test_binder.py` and `test_binder_preempt.py`: `run_binder`
starts ``python -m services.binder`` with a least-privilege kubeconfig and a
`CollectingScheduler` gRPC server that keeps every outcome the binder reports, waits for
/readyz and stops both at the end.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from kubernetes import client

from splitsched.testing.controlplane import REPO_ROOT
from splitsched.testing.kube import service_account_kubeconfig, wait_for
from splitsched.v1 import binder_pb2_grpc, scheduler_pb2

Outcome = scheduler_pb2.BindingOutcome


@dataclass
class CollectingScheduler:
    """A fake ``Scheduler`` serving only ReportBindingOutcome; keeps what it is sent."""

    outcomes: list[Outcome] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def report(
        self, request: scheduler_pb2.ReportBindingOutcomeRequest, context: Any
    ) -> scheduler_pb2.ReportBindingOutcomeResponse:
        with self.lock:
            self.outcomes.extend(request.outcomes)
        return scheduler_pb2.ReportBindingOutcomeResponse(accepted=len(request.outcomes))

    def outcome(self, decision_id: str, *, timeout: float = 30.0) -> Outcome:
        """The decision's final outcome (not the IN_PROGRESS re-reports of a decision in
        flight for more than a second)."""

        def find() -> Outcome | None:
            with self.lock:
                return next(
                    (o for o in self.outcomes
                     if o.decision_id == decision_id and o.result != Outcome.IN_PROGRESS),
                    None,
                )  # fmt: skip

        return wait_for(find, timeout=timeout, message=f"outcome of {decision_id}")


@dataclass
class BinderProcess:
    proc: subprocess.Popen[str]
    grpc_target: str
    http_url: str
    stub: binder_pb2_grpc.BinderStub
    scheduler: CollectingScheduler
    log_path: Path


def _read_listen_line(proc: subprocess.Popen[str], *, timeout: float) -> str:
    """The binder's ``listening`` line (read in a thread so a silent binder cannot hang us)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert proc.stdout is not None
        line = pool.submit(proc.stdout.readline).result(timeout=timeout)
    if not line:
        raise AssertionError("the binder did not print its listening line")
    return line


def _scheduler_server(scheduler: CollectingScheduler) -> tuple[grpc.Server, int]:
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    handler = grpc.unary_unary_rpc_method_handler(
        scheduler.report,
        request_deserializer=scheduler_pb2.ReportBindingOutcomeRequest.FromString,
        response_serializer=scheduler_pb2.ReportBindingOutcomeResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(
            "splitsched.v1.Scheduler", {"ReportBindingOutcome": handler}
        ),)
    )  # fmt: skip
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def binder_kubeconfig(
    kube_api: client.ApiClient,
    *,
    namespace: str,
    directory: Path,
    rules: Sequence[Mapping[str, Any]],
) -> Path:
    """The kubeconfig of a ServiceAccount ``binder`` allowed exactly ``rules`` (a bearer
    token: it passes through a fault proxy)."""
    return service_account_kubeconfig(
        kube_api, namespace=namespace, name="binder", cluster_role_rules=rules,
        directory=directory,
    )  # fmt: skip


@contextlib.contextmanager
def run_binder(
    kube_api: client.ApiClient,
    *,
    namespace: str,
    directory: Path,
    rules: Sequence[Mapping[str, Any]],
    extra_args: Sequence[str] = (),
    kubeconfig: Path | None = None,
    log_name: str = "binder.log",
) -> Iterator[BinderProcess]:
    """A ready binder with a ServiceAccount allowed exactly `rules` (or `kubeconfig`, one
    made by `binder_kubeconfig`, e.g. pointed at a fault proxy); stopped on exit."""
    if kubeconfig is None:
        kubeconfig = binder_kubeconfig(kube_api, namespace=namespace, directory=directory,
                                       rules=rules)  # fmt: skip
    scheduler = CollectingScheduler()
    sched_server, sched_port = _scheduler_server(scheduler)
    log_path = directory / log_name
    log_file = log_path.open("w")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "services.binder",
            "--kubeconfig", str(kubeconfig),
            "--listen", "127.0.0.1:0",
            "--http-listen", "127.0.0.1:0",
            "--scheduler", f"127.0.0.1:{sched_port}",
            "--binder-id", "it-binder",
            *extra_args,
        ],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE, stderr=log_file, text=True,
    )  # fmt: skip
    channel: grpc.Channel | None = None
    try:
        line = _read_listen_line(proc, timeout=30)
        match = re.search(r"grpc=(\S+) http=(\S+)", line)
        assert match, line
        grpc_target, http_url = match.group(1), f"http://{match.group(2)}"

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{http_url}/readyz", timeout=2) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait_for(ready, timeout=30, message="binder /readyz")
        channel = grpc.insecure_channel(grpc_target)
        yield BinderProcess(
            proc=proc, grpc_target=grpc_target, http_url=http_url,
            stub=binder_pb2_grpc.BinderStub(channel), scheduler=scheduler, log_path=log_path,
        )  # fmt: skip
    finally:
        if channel is not None:
            channel.close()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
        log_file.close()
        sched_server.stop(0)
