"""The back-pressure bench's arithmetic (``bench.backpressure.analysis``) and what it reads
(``sampling.parse_metrics``, ``outcome.settled``): the rate check can fail, and a pod
counts as settled only when bound or with its reason."""

from __future__ import annotations

from typing import Any

from bench.backpressure import analysis, outcome, sampling


def _rows(counts: list[int], *, every: float = 1.0) -> list[dict[str, Any]]:
    return [
        {"t": i * every, "metrics": {"b": {sampling.REQUESTS: float(c), "g": float(c % 7)}}}
        for i, c in enumerate(counts)
    ]


def test_a_binder_at_its_rate_passes() -> None:
    rows = _rows([100 * i for i in range(90)])
    rate = analysis.request_rate(rows, "b", qps=100, burst=10)
    assert rate["windows_over_limit"] == []
    assert rate["max_rate_1s"] == rate["max_rate_10s"] == rate["max_rate_60s"] == 100


def test_a_binder_over_its_rate_for_a_minute_fails() -> None:
    rows = _rows([130 * i for i in range(90)])
    rate = analysis.request_rate(rows, "b", qps=100, burst=10)
    assert rate["windows_over_limit"]  # 7,800 > 100 * (60 + 10) + 10 in every window
    assert rate["max_rate_60s"] == 130


def test_peaks_are_per_service_and_leave_the_counter_out() -> None:
    peaks = analysis.gauge_peaks(_rows([1, 5, 6, 3]))
    assert peaks == {"b": {"g": 6.0}}


def test_parse_metrics_keeps_the_gauges_and_the_queue_label() -> None:
    text = (
        'scheduler_pending_pods{queue="active"} 3.0\n'
        'scheduler_pending_pods{queue="backoff"} 1.0\n'
        'splitsched_binder_api_requests_total{method="GET"} 4.0\n'
        'splitsched_binder_api_requests_total{method="POST"} 5.0\n'
        "splitsched_binder_queued 2.0\n"
        "process_cpu_seconds_total 9.0\n"
    )
    assert sampling.parse_metrics(text) == {
        "scheduler_pending_pods{active}": 3.0,
        "scheduler_pending_pods{backoff}": 1.0,
        sampling.REQUESTS: 9.0,
        "splitsched_binder_queued": 2.0,
    }


def test_parse_metrics_keeps_the_scheduler_outcomes_by_result() -> None:
    text = (
        "# TYPE splitsched_scheduler_binding_outcomes counter\n"
        'splitsched_scheduler_binding_outcomes_total{result="BOUND"} 7.0\n'
        'splitsched_scheduler_binding_outcomes_total{result="BIND_FAILED"} 3.0\n'
    )
    assert sampling.parse_metrics(text) == {
        "splitsched_scheduler_binding_outcomes_total{BOUND}": 7.0,
        "splitsched_scheduler_binding_outcomes_total{BIND_FAILED}": 3.0,
    }


def test_settled_needs_a_node_or_the_reason() -> None:
    def pod(name: str, node: str = "", cond: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "spec": {"nodeName": node} if node else {},
            "status": {"conditions": [cond] if cond else []},
        }

    reason = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
              "message": "0/2 nodes are available: 2 Too many pods."}  # fmt: skip
    pods = [
        pod("a", "n1"),
        pod("b", cond=reason),
        pod("c"),
        pod("d", cond={**reason, "message": ""}),
    ]
    assert outcome.settled(pods) == {"bound": ["a"], "reason": ["b"], "neither": ["c", "d"]}
