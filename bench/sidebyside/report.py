"""The benchmark's outputs: the stdout table, splitsched/kube-scheduler ratios, the result
JSON (with machine, versions and command) and a PNG of bound pods over time.

Called by ``bench.sidebyside.__main__`` and the smoke test, on ``runner.RunResult``s.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.sidebyside.measure import Latency
from bench.sidebyside.runner import CONTROL_PLANE, Options, RunResult
from splitsched.testing import controlplane

BASELINE = "kube-scheduler"
CEILING = "ceiling"


def _f(value: float, digits: int = 1) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def table(results: Sequence[RunResult]) -> str:
    """The main table: throughput, latency and CPU seconds per run."""
    head = (
        f"{'workload':9} {'contender':24} {'#':>2} {'bound':>11} {'avg/s':>7} {'p50/s':>6} "
        f"{'p90/s':>6} {'p99/s':>6} {'srv/s':>6} {'lat p50':>8} {'lat p99':>8} {'secs':>6} "
        f"{'cpu ours':>8} {'apisrv':>7} {'etcd':>6} {'kwok':>6} {'harness':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        tp, cpu = r.throughput, r.cpu_seconds
        lines.append(
            f"{r.workload:9} {r.contender:24} {r.round:>2} {f'{r.bound}/{r.pods}':>11} "
            f"{_f(tp.average):>7} {_f(tp.p50, 0):>6} {_f(tp.p90, 0):>6} {_f(tp.p99, 0):>6} "
            f"{_f(r.server_average):>6} "
            f"{_f(r.latency.p50, 2):>8} {_f(r.latency.p99, 2):>8} {_f(r.seconds):>6} "
            f"{_f(r.our_cpu):>8} {_f(cpu.get('kube-apiserver', math.nan)):>7} "
            f"{_f(cpu.get('etcd', math.nan)):>6} {_f(cpu.get('kwok', math.nan)):>6} "
            f"{_f(cpu.get('harness', math.nan)):>7}"
            + ("  INCOMPLETE" if not r.complete else "")
            + (f"  {r.overcommitted} OVERCOMMITTED" if r.overcommitted else "")
            + (f"  {r.placement_violations} VIOLATIONS" if r.placement_violations else "")
        )
    return "\n".join(lines)


def cpu_table(results: Sequence[RunResult]) -> str:
    """CPU seconds per process of each contender (the control plane is in the main table)."""
    lines = []
    for r in results:
        own = {k: v for k, v in r.cpu_seconds.items() if k not in CONTROL_PLANE}
        per_pod = 1000 * r.our_cpu / r.bound if r.bound else math.nan
        parts = ", ".join(f"{k} {v:.1f}" for k, v in own.items())
        lines.append(f"{r.workload:9} {r.contender:24} {parts}  ({_f(per_pod, 2)} ms CPU per pod)")
        rss = {k: v for k, v in r.peak_rss_mib.items() if k not in CONTROL_PLANE}
        if rss:
            each = ", ".join(f"{k} {v:.0f}" for k, v in rss.items())
            lines.append(f"{'':9} {'':24} peak RSS MiB: {each} (total {r.our_peak_rss_mib:.0f})")
    return "\n".join(lines)


def representative(results: Sequence[RunResult]) -> list[RunResult]:
    """One run per (workload, contender): the median by throughput (server stamps, or the
    watch's when too short; the lower median for an even count; incomplete runs lowest)."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.workload, r.contender), []).append(r)

    def key(r: RunResult) -> float:
        avg = r.server_average if not math.isnan(r.server_average) else r.throughput.average
        return -1.0 if not r.complete or math.isnan(avg) else avg

    return [sorted(g, key=key)[(len(g) - 1) // 2] for g in groups.values()]


def ratios(results: Sequence[RunResult]) -> dict[str, dict[str, dict[str, float]]]:
    """workload -> contender -> {throughput, latency_p50, latency_p99} over kube-scheduler's
    (QPS 5000) in the same run (median runs when repeated); throughput > 1 and latency < 1
    favour the contender."""
    results = representative(results)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for base in (r for r in results if r.contender == BASELINE):
        row: dict[str, dict[str, float]] = {}
        for r in results:
            if r.workload != base.workload or r.contender == BASELINE:
                continue
            row[r.contender] = {
                "throughput": _ratio(r.throughput.average, base.throughput.average),
                "server_throughput": _ratio(r.server_average, base.server_average),
                "latency_p50": _ratio(r.latency.p50, base.latency.p50),
                "latency_p99": _ratio(r.latency.p99, base.latency.p99),
                "cpu": _ratio(r.our_cpu, base.our_cpu),
                "peak_rss": _ratio(r.our_peak_rss_mib, base.our_peak_rss_mib),
            }
        out[base.workload] = row
    return out


def pooled_latency(results: Sequence[RunResult]) -> dict[str, dict[str, Latency]]:
    """workload -> contender -> creation-to-bound latency over every pod of every round
    (rate workloads: the runs that recorded per-pod latencies)."""
    pooled: dict[str, dict[str, list[float]]] = {}
    for r in results:
        if r.latencies_ms:
            into = pooled.setdefault(r.workload, {}).setdefault(r.contender, [])
            into.extend(ms / 1000 for ms in r.latencies_ms)
    return {
        workload: {name: Latency.from_values(values) for name, values in row.items()}
        for workload, row in pooled.items()
    }


def pooled_text(results: Sequence[RunResult]) -> str:
    """The pooled latencies, with each contender's ratio over kube-scheduler's."""
    lines = []
    for workload, row in pooled_latency(results).items():
        rounds = len({r.round for r in results if r.workload == workload})
        lines.append(f"latency over every pod of {rounds} round(s), {workload}: p50 / p99 s")
        base = row.get(BASELINE)
        for name, lat in row.items():
            vs = ""
            if base is not None and name != BASELINE:
                vs = f"  x{_f(_ratio(lat.p50, base.p50), 2)}, x{_f(_ratio(lat.p99, base.p99), 2)}"
            lines.append(f"  {name:24} {lat.p50:.3f} / {lat.p99:.3f}  ({lat.count} pods){vs}")
    return "\n".join(lines)


def ceiling_fractions(results: Sequence[RunResult]) -> dict[str, dict[str, float]]:
    """workload -> contender -> its throughput (server stamps, median runs) as a fraction of
    the ceiling client's in the same run (``bench.sidebyside.ceiling``): how close each
    scheduler comes to what the API server can take at all."""
    results = representative(results)
    out: dict[str, dict[str, float]] = {}
    for top in (r for r in results if r.contender == CEILING):
        out[top.workload] = {
            r.contender: _ratio(r.server_average, top.server_average)
            for r in results
            if r.workload == top.workload and r.contender != CEILING
        }
    return out


def summary_text(results: Sequence[RunResult]) -> str:
    """What follows the tables: the ratios over kube-scheduler, the pooled latencies and
    the fractions of the ceiling (each when the run has them)."""
    parts = [ratio_text(results)]
    if pooled_latency(results):
        parts.append(pooled_text(results))
    fractions = ceiling_fractions(results)
    if fractions:
        lines = ["throughput as a fraction of the ceiling (Bindings and Events, no scheduling)"]
        for workload, row in fractions.items():
            lines += [f"  {workload:9} {name:24} {_f(f, 2)}" for name, f in row.items()]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _ratio(a: float, b: float) -> float:
    if b is None or a is None or math.isnan(a) or math.isnan(b) or b == 0:
        return math.nan
    return round(a / b, 3)


def ratio_text(results: Sequence[RunResult]) -> str:
    lines = [
        f"ratios over {BASELINE} (QPS 5000) in this run: throughput (watch-observed, "
        "scheduler_perf's method), throughput by the server's bind stamps, latency p50, p99, "
        "the contender's CPU seconds and peak RSS"
    ]
    for workload, row in ratios(results).items():
        for contender, r in row.items():
            lines.append(
                f"  {workload:9} {contender:24} x{_f(r['throughput'], 2)}  "
                f"server x{_f(r['server_throughput'], 2)}  "
                f"latency x{_f(r['latency_p50'], 2)}, x{_f(r['latency_p99'], 2)}  "
                f"CPU x{_f(r['cpu'], 2)}  peak RSS x{_f(r['peak_rss'], 2)}"
            )
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 1024**2, 1),
        "platform": platform.platform(),
    }


def versions() -> dict[str, Any]:
    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], capture_output=True, text=True, check=False,
                cwd=controlplane.REPO_ROOT,
            ).stdout.strip()  # fmt: skip
        except OSError:
            return ""

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "binaries": controlplane.binary_versions(),
        "git_commit": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def document(
    results: Sequence[RunResult],
    *,
    options: Options,
    command: str,
    started: dt.datetime,
    load_before: tuple[float, float, float],
    node_seconds: float,
) -> dict[str, Any]:
    """The result JSON."""
    from bench.sidebyside.contenders import kube_nodes_scored

    return {
        "benchmark": "side by side with kube-scheduler (scheduler_perf shapes on kwok nodes)",
        "command": command,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average": {
            "before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in os.getloadavg()],
            "note": "the machine is shared: other processes' load is in the numbers",
        },
        "versions": versions(),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(options).items()},
        "node_shape": {"cpu": "4", "memory": "32Gi", "pods": 110},
        "pod_shape": {"cpu": "100m", "memory": "500Mi"},
        "nodes_created_seconds": round(node_seconds, 1),
        "kube_scheduler_nodes_scored_per_pod": kube_nodes_scored(options.nodes),
        "splitsched_nodes_scored_per_pod": options.nodes,
        "throughput_method": (
            "scheduler_perf throughputCollector: 1 s ticks from the contender's launch; "
            "first non-zero tick is the baseline; empty intervals merged; average and "
            "nearest-rank percentiles of the per-interval rates"
        ),
        "server_throughput_method": (
            "binds per wall-clock second by PodScheduled's lastTransitionTime (set by the API "
            "server in the binding's own write, 1 s resolution), mean of the full seconds "
            "(first and last partial seconds left out); immune to watch delivery lag"
        ),
        "latency_method": (
            "harness monotonic clock: from the create call's 201 (rate workload) or from "
            "max(creation, first measured bind) (up-front workloads: start-up time left out) "
            "to the watch event showing spec.nodeName"
        ),
        "cpu_method": (
            "utime+stime from /proc/<pid>/stat, sampled every 0.2 s; per run from the last "
            "sample before the first measured bind to just after the last (start-up left out)"
        ),
        "results": [r.to_json() for r in results],
        "median_runs": [[r.workload, r.contender, r.round] for r in representative(results)],
        "ratios_vs_kube_scheduler": ratios(results),
        "fractions_of_ceiling": ceiling_fractions(results),
        "pooled_latency": {
            w: {c: asdict(lat) for c, lat in row.items()}
            for w, row in pooled_latency(results).items()
        },
    }


def plot(results: Sequence[RunResult], path: Path) -> None:
    """One column per workload that binds pods. Top: measured pods bound over time as the
    harness's watch saw them (seconds from the first measured bind), one line per contender
    (its median run when repeated). Bottom: binds per second by the API server's own stamps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for r in representative(results) if r.pods]  # idle runs bind nothing
    order = list(dict.fromkeys(r.workload for r in results))
    if not order:
        return
    fig, axes = plt.subplots(2, len(order), figsize=(5.2 * len(order), 7), squeeze=False)
    for col, workload in enumerate(order):
        top, bottom = axes[0][col], axes[1][col]
        for r in (r for r in results if r.workload == workload):
            if r.curve:
                xs = [0.0, *(p[0] for p in r.curve)]
                ys = [0, *(p[1] for p in r.curve)]
                top.plot(xs, ys, label=f"{r.contender} ({_f(r.throughput.average, 0)}/s)")
            if r.server_binds_per_second:
                counts = r.server_binds_per_second
                bottom.step(
                    range(len(counts)),
                    counts,
                    where="post",
                    label=f"{r.contender} ({_f(r.server_average, 0)}/s)",
                )
        top.set_title(f"{workload}: bound pods (watch)")
        top.set_xlabel("seconds since the first bind")
        top.set_ylabel("measured pods bound")
        bottom.set_title(f"{workload}: binds per second (API server stamps)")
        bottom.set_xlabel("second since the first bind's second")
        bottom.set_ylabel("pods bound in that second")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def default_stem(results_dir: Path, when: dt.datetime) -> Path:
    return results_dir / f"sidebyside-{when.strftime('%Y-%m-%dT%H%M')}"


def command_line() -> str:
    argv = [Path(sys.executable).name, "-m", "bench.sidebyside", *sys.argv[1:]]
    return " ".join(argv)
