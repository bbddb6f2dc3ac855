"""Runs the side-by-side benchmark: one control plane, one node set, every contender in turn.

Called by ``bench.sidebyside.__main__`` (``make bench``) and the smoke test
(``tests/integration/test_bench_smoke.py``). For each workload and contender, in a fresh
namespace:

1. the init pods are created already bound (the same placement for every contender) and
   the harness waits until kwok has them Running;
2. up-front workloads create all measured pods, then start a bind watch, then the
   contender; the rate workload starts the watch and the contender first, then creates pods
   at the fixed rate;
3. from the contender's launch until the watch has seen every measured pod with a node:
   bind times (throughput is sampled as scheduler_perf does, on 1 s ticks from the launch,
   the first non-empty tick being the baseline), CPU seconds of every process (contender,
   control plane, this harness) sampled every 0.2 s and taken from the first measured bind
   (``t0``, so start-up CPU is left out) until kwok has every measured pod Running (the
   work a bind sets off), optionally py-spy profiles of every splitsched process from the
   moment its PID exists;
4. the placements are checked from the API objects (``splitsched.testing.invariants``), the
   contender is stopped and the namespace deleted before the next one starts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.sidebyside import ceiling, contenders, devices, kubeio, measure, profiling, workloads
from bench.sidebyside.sampling import CpuSampler, per_second, server_bind_times, thin_curve
from splitsched.testing import controlplane, invariants, kube

log = logging.getLogger("bench.sidebyside")

#: Seconds between an idle contender's start and its idle window (its first list and sync).
IDLE_SETTLE_SECONDS = 5.0


#: The processes every contender shares: not counted as the contender's CPU or RSS. The
#: control plane's kube-controller-manager (since 11-25) was counted as the contender's
#: until 11-27, in every contender's row alike.
CONTROL_PLANE = frozenset({"kube-apiserver", "etcd", "kwok", "kube-controller-manager", "harness"})


@dataclass(frozen=True)
class Options:
    nodes: int = 500
    init_pods: int = 500
    pods: int = 2000
    rate: float = 100.0
    rate_seconds: float = 20.0
    #: The idle workload's window, after the contender has started and settled.
    idle_seconds: float = 60.0
    workloads: tuple[str, ...] = ("basic", "affinity", "rate")
    contenders: tuple[str, ...] = contenders.DEFAULT_CONTENDERS
    #: Control-plane state dir (default: a new temp dir, removed at the end).
    state_dir: Path | None = None
    keep_state: bool = False
    profile_dir: Path | None = None
    #: Seconds to wait for a run's pods to be bound (default: scaled to the pod count).
    timeout: float | None = None
    #: Rounds per workload; each round runs every contender once, the order rotated.
    repeat: int = 1


@dataclass
class RunResult:
    """One contender on one workload."""

    workload: str
    contender: str
    family: str
    pods: int
    bound: int
    complete: bool
    throughput: measure.Throughput
    latency: measure.Latency
    #: "creation" (rate workload) or "first bind" (up-front: from max(creation, t0)).
    latency_from: str
    #: t0 (the first measured bind) -> last bind.
    seconds: float
    #: From the first bind until the last bind's consequences settled (pods Running).
    cpu_seconds: dict[str, float]
    cpu_seconds_to_last_bind: dict[str, float]
    #: (seconds since t0, bound so far), thinned to at most CURVE_POINTS points.
    curve: list[tuple[float, int]]
    overcommitted: int
    placement_violations: int
    watch_events: int
    achieved_create_rate: float | None = None
    #: Binds per wall-clock second as the API server stamped them (PodScheduled's
    #: lastTransitionTime, 1 s resolution), from the first bind's second to the last's.
    server_binds_per_second: list[int] = field(default_factory=list)
    #: Watch-observed bind time minus the server's stamp (+0.5 s): how late the harness's
    #: watch saw the binds (+-0.5 s resolution).
    watch_lag: measure.Latency | None = None
    load_average: tuple[float, float] = (0.0, 0.0)
    contender_config: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    round: int = 0
    #: Peak RSS (VmHWM, MiB) per process at the run's end: the contender's processes live
    #: for this run only; the control plane's (long-lived) peak covers every run so far.
    peak_rss_mib: dict[str, float] = field(default_factory=dict)
    #: Every pod's creation -> bound latency in ms (rate workloads only), so percentiles
    #: can be taken over every pod of every round, not one round picked by throughput.
    latencies_ms: list[int] = field(default_factory=list)

    @property
    def our_peak_rss_mib(self) -> float:
        """The contender's own processes' peak RSS added up (MiB)."""
        return round(sum(v for k, v in self.peak_rss_mib.items() if k not in CONTROL_PLANE), 1)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        """Back from ``to_json`` (to re-render a recorded run's table and plot)."""
        fields = dict(data)
        fields["throughput"] = measure.Throughput(**fields["throughput"])
        fields["latency"] = measure.Latency(**fields["latency"])
        if fields.get("watch_lag"):
            fields["watch_lag"] = measure.Latency(**fields["watch_lag"])
        fields["curve"] = [tuple(p) for p in fields["curve"]]
        fields["load_average"] = tuple(fields["load_average"])
        return cls(**fields)

    @property
    def server_average(self) -> float:
        """Mean binds per second by the server's stamps, the partial first and last seconds
        left out (NaN for runs shorter than 3 s)."""
        inner = self.server_binds_per_second[1:-1]
        return sum(inner) / len(inner) if inner else float("nan")

    @property
    def our_cpu(self) -> float:
        """CPU seconds of the contender's own processes."""
        return round(sum(v for k, v in self.cpu_seconds.items() if k not in CONTROL_PLANE), 2)


def run_timeout(options: Options, pods: int) -> float:
    return options.timeout if options.timeout else max(120.0, pods / 10 + 60)


def create_nodes(api: client.ApiClient, count: int) -> list[str]:
    """Create the kwok nodes in three zones; returns names interleaved zone by zone."""
    by_zone: list[list[str]] = []
    for prefix, n, labels in workloads.node_groups(count):
        by_zone.append(
            kube.create_kwok_nodes(
                api,
                n,
                name_prefix=prefix,
                cpu=workloads.NODE_CPU,
                memory=workloads.NODE_MEMORY,
                pods=workloads.NODE_PODS,
                labels=labels,
                workers=16,
                timeout=max(120.0, count / 5),
            )
        )
    names = []
    for i in range(max(len(z) for z in by_zone)):
        names += [z[i] for z in by_zone if i < len(z)]
    return names


async def wait_running(io: kubeio.KubeIO, namespace: str, count: int, *, within: float) -> None:
    """Wait until kwok reports ``count`` init pods Running (so its updates are done)."""
    deadline = time.monotonic() + within
    while True:
        listing = await io.list_pods(namespace, label_selector=f"{workloads.BENCH_LABEL}=init")
        running = sum(
            1 for p in listing["items"] if (p.get("status") or {}).get("phase") == "Running"
        )
        if running >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{running}/{count} init pods Running after {within:.0f}s")
        await asyncio.sleep(0.5)


class Bench:
    """The whole benchmark: ``await Bench(options).run()`` returns every RunResult."""

    def __init__(self, options: Options, *, progress: Callable[[str], None] = print) -> None:
        self.options = options
        self.progress = progress
        self.workdir = Path(tempfile.mkdtemp(prefix="splitsched-bench-"))
        state_dir = options.state_dir or self.workdir / "cluster"
        self.cp = controlplane.ControlPlane(state_dir, die_with_parent=True)
        self.nodes: list[str] = []
        self.results: list[RunResult] = []
        self.node_seconds = 0.0
        self.control_plane_pids: dict[str, int] = {}

    async def run(self) -> list[RunResult]:
        opts = self.options
        wls = workloads.build(
            opts.workloads,
            init_pods=opts.init_pods,
            pods=opts.pods,
            rate=opts.rate,
            rate_seconds=opts.rate_seconds,
            idle_seconds=opts.idle_seconds,
        )
        try:
            started = time.monotonic()
            await asyncio.to_thread(self.cp.up)
            self.progress(f"control plane up at {self.cp.server_url} ({self.cp.state_dir})")
            self.admin = kube.api_client_from_kubeconfig(self.cp.kubeconfig_path)
            state = self.cp.load_state()
            self.control_plane_pids = dict(state.pids) if state else {}
            t = time.monotonic()
            self.nodes = await asyncio.to_thread(create_nodes, self.admin, opts.nodes)
            self.node_seconds = time.monotonic() - t
            self.progress(
                f"{len(self.nodes)} kwok nodes Ready in {self.node_seconds:.1f}s "
                f"(control plane up {t - started:.1f}s)"
            )
            if any(wl.devices for wl in wls):
                await asyncio.to_thread(devices.publish, self.admin, self.nodes)
            async with kubeio.KubeIO(
                server=self.cp.server_url, ssl_context=self.cp.ssl_context()
            ) as io:
                for wl in wls:
                    for round_ in range(opts.repeat):
                        k = round_ % len(opts.contenders)
                        for name in (*opts.contenders[k:], *opts.contenders[:k]):
                            if name == ceiling.NAME and not ceiling.fits(wl):
                                continue
                            result = await self.run_one(io, wl, name)
                            result.round = round_
                            self.results.append(result)
                            self.progress(summary_line(result))
        finally:
            self.cp.down()
            if not opts.keep_state:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return self.results

    def _pids(self, contender: contenders.Contender) -> dict[str, int]:
        pids = {**self.control_plane_pids, "harness": os.getpid()}
        pids.update(contender.pids())
        return pids

    async def run_one(self, io: kubeio.KubeIO, wl: workloads.Workload, name: str) -> RunResult:
        """One contender on one workload, in a fresh namespace (the module docstring's
        steps 1-4)."""
        contender = contenders.make(
            name,
            kubeconfig=self.cp.kubeconfig_path,
            admin_api=self.admin,
            workdir=self.workdir / wl.name,
        )
        self.progress(f"[{wl.name}] {name}: preparing {wl.init_pods} init + {wl.pods} pods")
        ns = await asyncio.to_thread(
            kube.create_namespace, self.admin, prefix=f"bench-{wl.name}"[:40]
        )
        run = OneRun(self, io, wl, contender, ns)
        await run.measure()
        return await run.collect()


@dataclass
class OneRun:
    """The state of one run while it is measured, then turned into a ``RunResult``."""

    bench: Bench
    io: kubeio.KubeIO
    wl: workloads.Workload
    contender: contenders.Contender
    namespace: str
    error: str | None = None
    achieved: float | None = None
    created: dict[str, float] = field(default_factory=dict)
    complete: bool = False
    t_launch: float = field(default_factory=time.monotonic)
    t_bound: float = 0.0
    t_idle: float = 0.0
    load_start: float = field(default_factory=lambda: os.getloadavg()[0])
    wall_offset: float = field(default_factory=lambda: time.time() - time.monotonic())
    peak_rss: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        opts = self.bench.options
        self.watch = kubeio.BindWatch(self.io, self.namespace, only=lambda n: n.startswith("pod-"))
        self.profilers = (
            profiling.Profilers(opts.profile_dir, tag=f"{self.wl.name}-{self.contender.name}")
            if opts.profile_dir and self.contender.family == "splitsched"
            else None
        )
        profilers = self.profilers
        self.sampler = CpuSampler(
            lambda: self.bench._pids(self.contender),
            on_pids=(lambda: profilers.attach(self.contender.pids())) if profilers else None,
        )

    async def measure(self) -> None:
        """Steps 1-3: init pods, measured pods, the contender, until every pod is bound."""
        sampler_task: asyncio.Task[None] | None = None
        try:
            await self._create_init_pods()
            measured = [
                self.wl.measured_pod(i, scheduler_name=self.contender.scheduler_name)
                for i in range(self.wl.pods)
            ]
            if self.wl.devices:  # the claims made before the contender starts
                await asyncio.to_thread(devices.create_template, self.bench.admin, self.namespace)
            if self.wl.upfront:
                self.created = await self.io.create_pods(self.namespace, measured)
            if self.wl.devices:
                await devices.wait_claims_made(self.io, self.namespace, len(measured), within=300)
            await self.watch.start()
            self.t_launch = time.monotonic()
            sampler_task = asyncio.create_task(self.sampler.run())
            await asyncio.to_thread(self.contender.start)
            self.bench.progress(f"[{self.wl.name}] {self.contender.name}: ready; measuring")
            if self.wl.idle:
                await self._idle_window()
                return
            if not self.wl.upfront:
                self.created, self.achieved = await self.io.create_pods_at_rate(
                    self.namespace, measured, rate=self.wl.rate
                )
            await self._wait_bound()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("run %s/%s failed", self.wl.name, self.contender.name)
            tail = self.contender.log_tail()
            if tail:
                self.bench.progress(tail)
        finally:
            if sampler_task is not None:
                sampler_task.cancel()
            if self.profilers is not None:
                for path in self.profilers.stop():
                    self.bench.progress(f"  profile summary: {path}")
            await self.watch.stop()

    async def _create_init_pods(self) -> None:
        nodes = self.bench.nodes
        init = [
            self.wl.init_pod(
                i, node=nodes[i % len(nodes)], scheduler_name=self.contender.scheduler_name
            )
            for i in range(self.wl.init_pods)
        ]
        await self.io.create_pods(self.namespace, init)
        await wait_running(self.io, self.namespace, len(init), within=max(120.0, len(init) / 5))

    async def _idle_window(self) -> None:
        """The idle workload: let the started contender settle, then sample its CPU over
        the window (``t_idle`` to ``t_bound``)."""
        await asyncio.sleep(IDLE_SETTLE_SECONDS)
        self.sampler.sample()
        self.t_idle = time.monotonic()
        await asyncio.sleep(self.wl.idle_seconds)
        self.sampler.sample()
        self.t_bound = time.monotonic()
        self.complete = True

    async def _wait_bound(self) -> None:
        pods = self.wl.pods
        self.complete = await self.watch.wait(pods, within=run_timeout(self.bench.options, pods))
        self.sampler.sample()
        self.t_bound = time.monotonic()
        if not self.complete:
            self.error = f"timed out: {len(self.watch.bound)}/{pods} bound"
            return
        # The work a bind sets off (kwok's Running update, its watch events, the
        # Scheduled Event) belongs to the run: CPU is taken when it has settled.
        await self.watch.wait(pods, within=60, running=True)
        await asyncio.sleep(0.5)
        self.sampler.sample()

    async def collect(self) -> RunResult:
        """Step 4: check the placements, stop the contender, delete the namespace."""
        admin = self.bench.admin
        try:
            nodes, pods = await asyncio.to_thread(invariants.cluster_state, admin)
            over = invariants.overcommitted(nodes, pods)
            # The contender's own pods are judged; every pod counts for a node's room. A
            # namespace of an earlier run still being deleted is not this run's to judge.
            mine = [p for p in pods if p.namespace == self.namespace]
            violations = invariants.placement_violations(nodes, mine)
            listing = await self.io.list_pods(
                self.namespace, label_selector=f"{workloads.BENCH_LABEL}=measured"
            )
            server = server_bind_times(listing["items"])
            if self.wl.devices and self.complete:
                wrong = await asyncio.to_thread(devices.allocation_problems, admin, self.namespace)
                self.error = f"{len(wrong)} claims wrong: {wrong[:3]}" if wrong else self.error
        finally:
            describe = self.contender.describe()
            self.peak_rss = measure.snapshot(self.bench._pids(self.contender), measure.peak_rss_mib)
            await asyncio.to_thread(self.contender.stop)
            try:
                if self.wl.devices:
                    await asyncio.to_thread(devices.release, admin, self.namespace)
                await asyncio.to_thread(kube.delete_namespace, admin, self.namespace, timeout=180)
            except Exception as exc:  # the next run goes on; its judge skips these pods
                self.bench.progress(f"  namespace {self.namespace} not deleted: {exc!r:.300}")
        return self._result(len(over), len(violations), server, describe)

    def _result(
        self, over: int, violations: int, server: dict[str, float], describe: dict[str, Any]
    ) -> RunResult:
        wl, watch = self.wl, self.watch
        binds = list(watch.bound.values())
        # t0: the first measured bind. Up-front pods wait from then on (the contenders'
        # start-up times differ and are not what is measured); rate pods from creation.
        t0 = min(binds) if binds else (self.t_idle if wl.idle else self.t_launch)
        created = self.created
        refs = created if not wl.upfront else {k: max(v, t0) for k, v in created.items()}
        return RunResult(
            workload=wl.name,
            contender=self.contender.name,
            family=self.contender.family,
            pods=wl.pods,
            bound=len(watch.bound),
            complete=self.complete,
            throughput=measure.Throughput.from_binds(binds, start=self.t_launch),
            latency=measure.Latency.from_pairs(refs, watch.bound),
            latency_from="first bind" if wl.upfront else "creation",
            seconds=round(max(binds) - t0, 3) if binds else float("nan"),
            cpu_seconds=self.sampler.window(t0, self.t_bound if wl.idle else None),
            cpu_seconds_to_last_bind=self.sampler.window(t0, self.t_bound),
            curve=thin_curve(binds, t0),
            overcommitted=over,
            placement_violations=violations,
            watch_events=watch.events,
            achieved_create_rate=round(self.achieved, 1) if self.achieved else None,
            server_binds_per_second=per_second(server.values()),
            watch_lag=measure.Latency.from_pairs(
                {k: v + 0.5 - self.wall_offset for k, v in server.items()}, watch.bound
            ),
            load_average=(round(self.load_start, 2), round(os.getloadavg()[0], 2)),
            contender_config=describe,
            error=self.error,
            peak_rss_mib=self.peak_rss,
            latencies_ms=[]
            if wl.upfront
            else sorted(round(1000 * v) for v in measure.pair_latencies(refs, watch.bound)),
        )


def summary_line(r: RunResult) -> str:
    tp = r.throughput
    return (
        f"[{r.workload}] {r.contender}: {r.bound}/{r.pods} bound, {tp.average:.1f} pods/s avg "
        f"(p50 {tp.p50:.0f}, {tp.samples} samples), latency p50 {r.latency.p50:.2f}s "
        f"p99 {r.latency.p99:.2f}s, {r.seconds:.1f}s" + (f"  ERROR: {r.error}" if r.error else "")
    )
