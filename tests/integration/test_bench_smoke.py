"""Keeps the side-by-side benchmark (``bench/sidebyside``) working: a small run through its
CLI on its own control plane (and one of the DRA workload), and the throughput arithmetic
it shares with scheduler_perf;
and the back-pressure bench (``bench/backpressure``), a small run through its CLI.

No timing assertions: the run checks that every contender bound every pod, that the
placements are valid, and that the JSON and the PNG are written.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, cast

import pytest

from bench.backpressure import __main__ as bp_cli
from bench.sidebyside import __main__ as cli
from bench.sidebyside import measure, report, runner


def test_throughput_samples_follow_scheduler_perf() -> None:
    # 10 binds/s from t=0.05 for 5 s; ticks every second from t=0.
    binds = [0.05 + i / 10 for i in range(50)]
    samples = measure.throughput_samples(binds, start=0.0, end=max(binds))
    # The first tick (t=1) is only the baseline; ticks 2..4 each see 10 new binds; the
    # partial interval after the last tick is dropped.
    assert samples == pytest.approx([10.0, 10.0, 10.0])


def test_empty_intervals_are_merged_and_repeated() -> None:
    # 5 binds before t=1, nothing in (1, 3], 20 binds in (3, 4].
    binds = [0.5] * 5 + [3.5] * 20
    samples = measure.throughput_samples(binds, start=0.0, end=4.0)
    assert samples == pytest.approx([20 / 3] * 3)
    tp = measure.Throughput.from_binds(binds, start=0.0)
    assert tp.samples == 0  # the last bind ends the run at 3.5, before the tick at 4
    assert tp.overall == pytest.approx(25 / 3.0)


def test_nearest_rank_percentiles() -> None:
    values = sorted(float(v) for v in range(1, 101))
    assert measure.nearest_rank(values, 50) == 50
    assert measure.nearest_rank(values, 99) == 99
    assert measure.nearest_rank([7.0], 90) == 7


@pytest.mark.integration
def test_bench_smoke_run_writes_results(tmp_path: Path) -> None:
    stem = tmp_path / "smoke"
    status = cli.main(
        [
            "--nodes", "20", "--init-pods", "20", "--pods", "100",
            "--workloads", "basic,idle", "--idle-seconds", "2",
            "--contenders", "kube-scheduler,splitsched-1,ceiling",
            "--output", str(stem), "--timeout", "120",
        ]
    )  # fmt: skip
    doc = json.loads(stem.with_suffix(".json").read_text())
    runs = {r["contender"]: r for r in doc["results"] if r["workload"] == "basic"}
    idle = {r["contender"]: r for r in doc["results"] if r["workload"] == "idle"}
    assert idle["splitsched-1"]["complete"] and idle["splitsched-1"]["pods"] == 0
    assert {"watcher", "scheduler", "binder-0"} <= idle["splitsched-1"]["cpu_seconds"].keys()
    assert "kube-scheduler" in idle["kube-scheduler"]["peak_rss_mib"]
    assert "cpu" in doc["ratios_vs_kube_scheduler"]["idle"]["splitsched-1"]
    assert set(runs) == {"kube-scheduler", "splitsched-1", "ceiling"}
    assert "ceiling" not in idle  # nothing to bind: the ceiling is not run
    fractions = doc["fractions_of_ceiling"]["basic"]
    assert set(fractions) == {"kube-scheduler", "splitsched-1"}
    for name, run in runs.items():
        assert run["error"] is None, (name, run["error"])
        assert run["complete"] and run["bound"] == run["pods"] == 100, name
        assert run["overcommitted"] == 0 and run["placement_violations"] == 0, name
        assert run["curve"][-1][1] == 100, name
        assert run["throughput"]["overall"] > 0, name
        assert "kube-apiserver" in run["cpu_seconds"] and "etcd" in run["cpu_seconds"], name
    assert "kube-scheduler" in runs["kube-scheduler"]["cpu_seconds"]
    assert {"watcher", "scheduler", "binder-0"} <= runs["splitsched-1"]["cpu_seconds"].keys()
    assert runs["kube-scheduler"]["peak_rss_mib"]["kube-scheduler"] > 10
    rss = runs["splitsched-1"]["peak_rss_mib"]
    assert {"watcher", "scheduler", "binder-0"} <= rss.keys() and min(rss.values()) > 10
    assert "splitsched-1" in doc["ratios_vs_kube_scheduler"]["basic"]
    assert doc["machine"]["cpus"] >= 1 and doc["versions"]["binaries"]["kube-scheduler"]
    assert status == 0
    png = stem.with_suffix(".png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) < 500_000


@pytest.mark.integration
def test_bench_devices_smoke_run_binds_every_pod_with_its_gpu(tmp_path: Path) -> None:
    """The DRA workload, each contender second once: every pod bound with a GPU of its
    node and none twice (the harness checks the claims and records an error otherwise),
    and the first contender's claims released before the second runs."""
    stem = tmp_path / "devices"
    status = cli.main(
        [
            "--nodes", "8", "--init-pods", "0", "--pods", "48", "--workloads", "devices",
            "--contenders", "kube-scheduler,splitsched-1", "--repeat", "2",
            "--output", str(stem), "--timeout", "120",
        ]
    )  # fmt: skip
    doc = json.loads(stem.with_suffix(".json").read_text())
    runs = [r for r in doc["results"] if r["workload"] == "devices"]
    assert sorted(r["contender"] for r in runs) == ["kube-scheduler"] * 2 + ["splitsched-1"] * 2
    for run in runs:
        assert run["error"] is None, (run["contender"], run["error"])
        assert run["complete"] and run["bound"] == run["pods"] == 48, run["contender"]
    assert status == 0


class _StoppedBench:
    """A bench stopped by SIGTERM (`task.cancel`) after finishing one run."""

    def __init__(self, *, stop: bool) -> None:
        self.results: list[str] = []
        self.stop = stop

    async def run(self) -> list[str]:
        self.results.append("basic/kube-scheduler")
        if self.stop:
            raise asyncio.CancelledError
        return self.results


def test_a_stopped_bench_keeps_the_runs_it_finished() -> None:
    results, interrupted = cli._run_bench(cast(Any, _StoppedBench(stop=True)))
    assert [str(r) for r in results] == ["basic/kube-scheduler"] and interrupted
    results, interrupted = cli._run_bench(cast(Any, _StoppedBench(stop=False)))
    assert [str(r) for r in results] == ["basic/kube-scheduler"] and not interrupted


def test_named_sizes_fill_in_what_the_flags_leave_out() -> None:
    five = cli.parse_args(["--size", "5k"])
    assert (five.nodes, five.init_pods, five.pods) == (5000, 5000, 10000)
    assert five.workloads == ("basic", "spread", "affinity")
    ten = cli.parse_args(["--size", "10k", "--workloads", "basic", "--pods", "30"])
    assert (ten.nodes, ten.init_pods, ten.pods, ten.workloads) == (10000, 10000, 30, ("basic",))
    assert cli.parse_args([]).nodes == runner.Options().nodes


def test_peak_rss_reads_this_process_and_skips_gone_ones() -> None:
    assert (measure.peak_rss_mib(os.getpid()) or 0) > 10
    assert measure.snapshot(
        {"me": os.getpid(), "gone": 2**22 + 7}, measure.peak_rss_mib
    ).keys() == {"me"}


def _run(contender: str, round_: int, latencies_ms: list[int]) -> runner.RunResult:
    lat = measure.Latency.from_values(ms / 1000 for ms in latencies_ms)
    return runner.RunResult(
        workload="rate", contender=contender, family=contender, pods=len(latencies_ms),
        bound=len(latencies_ms), complete=True,
        throughput=measure.Throughput.from_binds([1.0, 2.0], start=0.0), latency=lat,
        latency_from="creation", seconds=1.0, cpu_seconds={}, cpu_seconds_to_last_bind={},
        curve=[], overcommitted=0, placement_violations=0, watch_events=0, round=round_,
        latencies_ms=latencies_ms,
    )  # fmt: skip


def test_latency_is_pooled_over_every_pod_of_every_round() -> None:
    """Two rounds that disagree pool into one figure per contender: not the round a
    throughput median happened to pick."""
    results = [
        _run("kube-scheduler", 0, [100] * 9 + [900]),
        _run("kube-scheduler", 1, [300] * 10),
        _run("splitsched-2", 0, [50] * 10),
        _run("splitsched-2", 1, [150] * 10),
    ]
    pooled = report.pooled_latency(results)["rate"]
    assert pooled["kube-scheduler"].count == 20 and pooled["splitsched-2"].count == 20
    assert pooled["kube-scheduler"].p50 == 0.3 and pooled["kube-scheduler"].p99 == 0.9
    assert pooled["splitsched-2"].p50 == 0.05 and pooled["splitsched-2"].p99 == 0.15
    text = report.pooled_text(results)
    assert "2 round(s)" in text and "x0.17, x0.17" in text


def test_the_shared_control_plane_is_not_the_contenders_cost() -> None:
    """kube-controller-manager runs beside the API server for every contender: counting it
    as the contender's (as until 11-27) hid part of the difference between them."""
    run = _run("splitsched-1", 0, [100])
    run.cpu_seconds = {"kube-controller-manager": 0.5, "kube-apiserver": 5.0, "scheduler": 1.0}
    run.peak_rss_mib = {"kube-controller-manager": 100.0, "etcd": 90.0, "scheduler": 110.0}
    assert (run.our_cpu, run.our_peak_rss_mib) == (1.0, 110.0)
    assert "kube-controller-manager" not in report.cpu_table([run])


def test_a_process_started_inside_the_window_counts_all_its_cpu() -> None:
    before = {"kube-apiserver": 10.0}
    after = {"kube-apiserver": 12.5, "ceiling": 0.25}
    assert measure.cpu_delta(before, after) == {"kube-apiserver": 2.5, "ceiling": 0.25}


def test_ceiling_fractions_use_each_contenders_median_run() -> None:
    runs = []
    for name, per_second in (("ceiling", 500), ("kube-scheduler", 400), ("splitsched-2", 450)):
        run = _run(name, 0, [100])
        run.workload, run.server_binds_per_second = "basic", [1, per_second, per_second, 1]
        runs.append(run)
    fractions = report.ceiling_fractions(runs)
    assert fractions == {"basic": {"kube-scheduler": 0.8, "splitsched-2": 0.9}}
    assert "fraction of the ceiling" in report.summary_text(runs)


@pytest.mark.integration
def test_backpressure_smoke_run_records_every_check(tmp_path: Path) -> None:
    """``bench.backpressure`` at 500 pods on 20 nodes of 20 pods: 400 bind, 100 cannot fit
    and must carry their reason; RSS and gauges sampled; the binders' rate checked."""
    status = bp_cli.main(
        [
            "--pods", "500", "--nodes", "20", "--node-pods", "20", "--timeout", "180",
            "--record", "--results-dir", str(tmp_path),
        ]
    )  # fmt: skip
    [path] = tmp_path.glob("backpressure-*.json")
    doc = json.loads(path.read_text())
    checks = doc["checks"]
    assert (checks["bound"], checks["with_reason"], checks["neither_count"]) == (400, 100, 0)
    assert checks["with_failed_scheduling_event"] == 100
    assert checks["over_allocatable"] == [] and checks["bound_twice"] == []
    assert {"watcher", "scheduler", "binder-0", "binder-1", "kube-apiserver", "etcd"} <= set(
        doc["peak_rss_kib"]
    )
    assert "splitsched_binder_queued" in doc["gauge_peaks"]["binder-0"]
    assert "scheduler_pending_pods{unschedulable}" in doc["gauge_peaks"]["scheduler"]
    assert "splitsched_watcher_ring_events" in doc["gauge_peaks"]["watcher"]
    for rate in doc["binder_rates"].values():
        assert rate["requests"] > 0 and rate["windows_over_limit"] == []
    assert status == 0
    assert path.with_suffix(".md").read_text().startswith("# Back-pressure: 500 pods")
