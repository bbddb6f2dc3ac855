"""One back-pressure run: control plane, nodes, services, every pod at once, samples,
checks (see the package docstring). Called by ``bench.backpressure.__main__`` and the
smoke test."""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.backpressure import analysis, outcome
from bench.backpressure.sampling import Sampler
from bench.sidebyside.kubeio import KubeIO
from splitsched.testing import controlplane, kube, stack

log = logging.getLogger("bench.backpressure")

POD_CPU, POD_MEMORY = "100m", "500Mi"


@dataclass
class Options:
    pods: int = 50_000
    nodes: int = 500
    #: Pods each node takes (its `pods` allocatable; cpu and memory are never the limit):
    #: below pods/nodes, the rest cannot fit and must get their reason.
    node_pods: int = 110
    binders: int = 2
    qps: float = 100.0
    burst: int = 10
    #: Concurrent pod creations (the harness's own connections).
    create_concurrency: int = 64
    timeout: float = 0.0  # seconds to settle; 0 = from the pod count
    #: Where to copy the services' logs before the work dir goes (None: nowhere).
    logs: Path | None = None

    def settle_timeout(self) -> float:
        return self.timeout or max(300.0, self.pods / 20)


def node_shape(opts: Options) -> dict[str, Any]:
    """Nodes where only the pod count can run out: 110 pods of 100m/500Mi use 11 cpu and
    55Gi."""
    return {"cpu": "16", "memory": "64Gi", "pods": opts.node_pods}


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
            cwd=controlplane.REPO_ROOT,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def _machine() -> str:
    return f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, load " + (
        ", ".join(f"{x:.1f}" for x in os.getloadavg())
    )


class Run:
    """``await Run(opts).run()`` -> the result dict (JSON-ready)."""

    def __init__(self, opts: Options, *, progress: Callable[[str], None] = print) -> None:
        self.opts = opts
        self.progress = progress
        self.workdir = Path(tempfile.mkdtemp(prefix="splitsched-backpressure-"))
        self.cp = controlplane.ControlPlane(self.workdir / "cluster", die_with_parent=True)
        self.stack: stack.Stack | None = None

    async def run(self) -> dict[str, Any]:
        try:
            await asyncio.to_thread(self.cp.up)
            admin = kube.api_client_from_kubeconfig(self.cp.kubeconfig_path)
            await self._nodes(admin)
            await asyncio.to_thread(self._services, admin)
            return await self._measure(admin)
        finally:
            if self.stack is not None:
                self.stack.stop()
                if self.opts.logs is not None:
                    shutil.copytree(self.stack.workdir, self.opts.logs, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("tls"))  # fmt: skip
            self.cp.down()
            shutil.rmtree(self.workdir, ignore_errors=True)

    async def _nodes(self, admin: Any) -> None:
        t = time.monotonic()
        await asyncio.to_thread(
            kube.create_kwok_nodes, admin, self.opts.nodes, name_prefix="bp-node",
            workers=16, timeout=max(120.0, self.opts.nodes / 5), **node_shape(self.opts),
        )  # fmt: skip
        self.progress(f"{self.opts.nodes} kwok nodes Ready in {time.monotonic() - t:.0f}s")

    def _services(self, admin: Any) -> None:
        sa_namespace = kube.create_namespace(admin, prefix="bp-sa")
        configs = stack.component_kubeconfigs(admin, namespace=sa_namespace, directory=self.workdir)
        self.stack = stack.Stack(
            workdir=self.workdir / "stack",
            watcher_kubeconfig=configs["watcher"],
            binder_kubeconfig=configs["binder"],
            binders=self.opts.binders,
            binder_args=["--qps", f"{self.opts.qps:g}", "--burst", str(self.opts.burst)],
        )
        self.stack.start(timeout=120.0)
        self.progress(f"services ready: {[s.name for s in self.stack.services]}")

    def _sampler(self) -> Sampler:
        assert self.stack is not None
        state = self.cp.load_state()
        pids = {**(dict(state.pids) if state else {}), "harness": os.getpid()}
        services = {}
        for svc in self.stack.services:
            assert svc.proc is not None
            pids[svc.name] = svc.proc.pid
            services[svc.name] = svc.http_url
        return Sampler(pids=pids, services=services)

    async def _measure(self, admin: Any) -> dict[str, Any]:
        opts = self.opts
        ns = await asyncio.to_thread(kube.create_namespace, admin, prefix="bp")
        pods = [
            kube.make_pod(f"p-{i}", cpu=POD_CPU, memory=POD_MEMORY, labels={"bench": "bp"})
            for i in range(opts.pods)
        ]
        sampler, stop = self._sampler(), asyncio.Event()
        async with KubeIO(
            server=self.cp.server_url, ssl_context=self.cp.ssl_context(),
            concurrency=opts.create_concurrency,
        ) as io:  # fmt: skip
            start = time.monotonic()
            tracker = outcome.PodTracker(io, ns)
            await tracker.start(start)
            sampling = asyncio.create_task(sampler.run(start, stop))
            await io.create_pods(ns, pods)
            created = time.monotonic() - start
            self.progress(f"{opts.pods} pods created in {created:.0f}s")
            done = await tracker.wait(opts.pods, within=opts.settle_timeout())
            settle = time.monotonic() - start
            self.progress(
                f"{'settled' if done else 'NOT settled'} after {settle:.0f}s: "
                f"{len(tracker.bound)} bound, {len(tracker.reason)} with a reason"
            )
            await asyncio.sleep(5.0)  # the last Events and reports, still sampled
            stop.set()
            await sampling
            await tracker.stop()
        checks = await asyncio.to_thread(outcome.final_checks, admin, ns)
        return self._result(sampler, tracker, checks, created=created, settle=settle)

    def _result(
        self,
        sampler: Sampler,
        tracker: outcome.PodTracker,
        checks: dict[str, Any],
        *,
        created: float,
        settle: float,
    ) -> dict[str, Any]:
        opts = self.opts
        assert self.stack is not None
        rates = {
            b.name: analysis.request_rate(sampler.rows, b.name, qps=opts.qps, burst=opts.burst)
            for b in self.stack.binder_services
        }
        return {
            "options": {**asdict(opts), "logs": str(opts.logs) if opts.logs else None},
            "node_shape": node_shape(opts),
            "commit": _commit(),
            "machine": _machine(),
            "create_seconds": round(created, 1),
            "settle_seconds": round(settle, 1),
            "checks": checks,
            "peak_rss_kib": sampler.peak_rss_kib,
            "binder_rates": rates,
            "gauge_peaks": analysis.gauge_peaks(sampler.rows),
            "settle_curve": tracker.curve,
            "samples": sampler.rows,
        }


def passed(result: dict[str, Any]) -> list[str]:
    """What went wrong ([] when nothing did)."""
    checks, problems = result["checks"], []
    if checks["neither_count"]:
        problems.append(f"{checks['neither_count']} pods neither bound nor with a reason")
    if checks["over_allocatable"]:
        problems.append(f"nodes over allocatable: {checks['over_allocatable']}")
    if checks["bound_twice"]:
        problems.append(f"pods bound twice: {checks['bound_twice']}")
    for name, rate in result["binder_rates"].items():
        if rate["windows_over_limit"]:
            problems.append(f"{name} above its rate limit: {rate['windows_over_limit'][:5]}")
    return problems
