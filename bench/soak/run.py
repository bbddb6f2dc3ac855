"""The soak's timeline: bring the cluster up, start the churn, the preemption rounds and
the disruptions in threads of their own, then sample every process every 10 s and check
the promises every 30 s until the time is up; stop the threads (a round under way is
finished and checked), check once more, and tear everything down.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.soak import checks, churn, cluster, disruptions, report, rounds, sampling
from splitsched.testing import kube

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Options:
    minutes: float = 30.0
    nodes: int = 200
    seed: int = 1
    check_every: float = 30.0
    sample_every: float = 10.0
    workdir: Path | None = None
    keep: bool = False
    #: The watcher's ring of deltas is a bounded buffer whose memory grows until it is
    #: full (100,000 deltas by default: over an hour of this churn). Sized so it fills
    #: during the warm-up, growth after minute 5 is a leak, not the ring filling. 0: the
    #: watcher's default.
    watcher_ring_size: int = 4000

    @property
    def judged(self) -> bool:
        """Whether the goals apply: a window of 5 minutes or more after the warm-up."""
        return self.minutes >= 10

    @property
    def warmup_minutes(self) -> float:
        """Minute 5 in a long run; a third of a short one."""
        return 5.0 if self.minutes >= 10 else self.minutes / 3


def git_commit() -> str:
    """The code's commit, read when the run starts (a commit made during it is not the
    code that ran)."""
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


@dataclass
class SoakResult:
    options: Options
    started_at: str
    commit: str = ""
    seconds: float = 0.0
    load: list[tuple[float, str]] = field(default_factory=list)
    checks: list[checks.CheckResult] = field(default_factory=list)
    rounds: list[rounds.RoundResult] = field(default_factory=list)
    disruptions: list[tuple[float, str]] = field(default_factory=list)
    churn: Counter[str] = field(default_factory=Counter)
    samples: list[sampling.Sample] = field(default_factory=list)
    reports: list[report.SeriesReport] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tracebacks: str = ""

    def invariant_failures(self) -> list[str]:
        """Every broken promise: a check, a preemption round, or a harness thread's error."""
        out = [f"harness: {e}" for e in self.errors]
        for c in self.checks:
            for kind in ("lost", "overcommitted", "bound_twice"):
                items: list[str] = getattr(c, kind)
                if items:
                    out.append(f"check at {c.at:.0f}s: {kind} ({len(items)}): {items[:5]}")
        for r in self.rounds:
            out += [f"round {r.number}: {f}" for f in r.failures]
        return out

    def goal_failures(self) -> list[str]:
        return [f"{r.series}: {v}" for r in self.reports if r.verdict for v in r.verdict]


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Soak:
    def __init__(self, options: Options, *, progress: Progress = print) -> None:
        self.options = options
        self.say = progress
        self.stop = threading.Event()
        started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.result = SoakResult(options, started, commit=git_commit())
        workdir = options.workdir or cluster.new_workdir()
        self.cluster = cluster.Cluster(
            workdir=workdir, nodes=options.nodes, keep=options.keep,
            ring_size=options.watcher_ring_size,
        )  # fmt: skip

    def run(self) -> SoakResult:
        t0 = time.monotonic()
        self.result.load.append((0.0, loadavg()))
        try:
            self.cluster.up(self.say)
            self._soak()
        finally:
            self.result.tracebacks = (
                self.cluster.stack.tracebacks() if self.cluster.services else ""
            )
            self.cluster.close()
            self.result.seconds = round(time.monotonic() - t0, 1)
        return self.result

    def _soak(self) -> None:
        c, opts = self.cluster, self.options
        api = kube.api_client_from_kubeconfig(c.cp.kubeconfig_path)  # type: ignore[union-attr]
        load = churn.Churn(api, c.namespace, c.general, seed=opts.seed)
        load.start()
        assert c.pool is not None and c.profiles is not None
        preempt = rounds.Rounds(
            kube.api_client_from_kubeconfig(c.cp.kubeconfig_path),  # type: ignore[union-attr]
            c.pool, c.classes, c.profiles, stop=self.stop,
        )  # fmt: skip
        ops = disruptions.Disruptions(c.stack, c.proxies)
        checker = checks.Checker(c.admin, c.proxies["binder"])
        threads = [
            self._thread("churn", lambda: self._churn(load)),
            self._thread("rounds", lambda: self._round(preempt)),
        ]
        try:
            self._measure(checker, ops, disruptions.Timeline(opts.minutes))
        finally:
            self.stop.set()
            for th in threads:
                th.join(timeout=rounds.FILL_TIMEOUT + rounds.SETTLE_TIMEOUT + 180)
            self._check(checker, time.monotonic() - ops.started)
            self.result.rounds = preempt.results
            self.result.disruptions = ops.log
            self.result.churn = load.done
            self.result.checks = checker.results
            end = time.monotonic() - ops.started
            warm = 60.0 * opts.warmup_minutes
            self.result.reports = report.analyse(
                self.result.samples, warmup_s=warm, end_s=end, judge=opts.judged
            )

    def _measure(
        self, checker: checks.Checker, ops: disruptions.Disruptions, timeline: disruptions.Timeline
    ) -> None:
        """Sample, check and disrupt on their periods until the time is up. Disruptions run
        on this thread, the one that started the services: orphanguard asks the kernel to
        stop a service when the *thread* that spawned it ends (PR_SET_PDEATHSIG), so a
        service restarted from a worker thread would be stopped with it."""
        opts = self.options
        next_sample = next_check = 0.0
        while (t := time.monotonic() - ops.started) < 60.0 * opts.minutes:
            self._disrupt(ops, timeline)
            if t >= next_sample:
                self.result.samples += sampling.sample(list(self.cluster.stack.services), t)
                next_sample += opts.sample_every
            if t >= next_check:
                self._check(checker, t)
                next_check += opts.check_every
            time.sleep(0.5)

    def _check(self, checker: checks.Checker, t: float) -> None:
        result = checker.check(t)
        self.result.load.append((round(t, 1), loadavg()))
        state = "ok" if result.ok else "BROKEN"
        self.say(
            f"[{t / 60:5.1f} min] check {state}: {result.pods} pods ({result.bound} bound, "
            f"{result.pending} pending), lost {len(result.lost)}, over "
            f"{len(result.overcommitted)}, bound twice {len(result.bound_twice)}; "
            f"load {loadavg()}"
        )

    def _churn(self, load: churn.Churn) -> None:
        load.step()
        time.sleep(0.5)

    def _round(self, preempt: rounds.Rounds) -> None:
        """One preemption round, then a pause (the machine is shared)."""
        r = preempt.run_one()
        self.say(
            f"preemption round {r.number}: {r.pods} pods, {r.bound} bound, {r.evicted} "
            f"evicted, {r.pending} pending, {r.seconds:.0f}s, "
            + ("ok" if not r.failures else f"FAILED: {r.failures}")
            + (f"; FailedScheduling late for {r.recorded_late}" if r.recorded_late else "")
        )
        self.stop.wait(rounds.PAUSE)

    def _disrupt(self, ops: disruptions.Disruptions, timeline: disruptions.Timeline) -> None:
        actions = {"handover": ops.leader_handover, "restart": ops.rolling_restart,
                   "cut": ops.cut_watches}  # fmt: skip
        for name in timeline.due(time.monotonic() - ops.started):
            seen = len(ops.log)
            try:
                actions[name]()
            except Exception as exc:
                self.result.errors.append(f"disruption {name}: {exc!r}")
                self.say(f"disruption {name} failed: {traceback.format_exc(limit=3)}")
            for _, what in ops.log[seen:]:
                self.say(f"disruption: {what}")

    def _thread(self, name: str, body: Callable[[], object]) -> threading.Thread:
        """Run ``body`` over and over until the stop; an error is recorded and the loop
        goes on (the run then fails: the harness must not hide a broken step)."""

        def loop() -> None:
            while not self.stop.is_set():
                try:
                    body()
                except Exception as exc:
                    self.result.errors.append(f"{name}: {exc!r}")
                    self.say(f"{name} failed: {traceback.format_exc(limit=3)}")
                    time.sleep(2.0)

        th = threading.Thread(target=loop, name=f"soak-{name}", daemon=True)
        th.start()
        return th
