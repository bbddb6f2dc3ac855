"""Tail keeping's parts (splitsched/runtime/tailkeep.py): the rule from the environment,
the sampler that records what it would drop, the carrier that tells the binder, and the
buffer that holds a trace until its root ends. Whole attempts kept and dropped:
tests/service/scheduler/test_tail_keeping.py and tests/e2e/test_tracing.py."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Decision

from splitsched.runtime.tailkeep import RecordUnsampled, TailRule, TraceBuffer, sampled_carrier


def test_the_rule_from_the_environment() -> None:
    assert TailRule.from_env({}) == TailRule(slower_than=1.0)
    assert TailRule.from_env({"SPLITSCHED_TRACES_KEEP_SLOWER_THAN": "0.25"}) == TailRule(0.25)
    assert TailRule.from_env({"SPLITSCHED_TRACES_KEEP_SLOWER_THAN": "soon"}) == TailRule(1.0)
    assert TailRule.from_env({"SPLITSCHED_TRACES_TAIL": "off"}) is None
    assert TailRule.from_env({"SPLITSCHED_TRACES_TAIL": "on"}) is not None


def span(name: str, trace_id: int, *, start: int = 0, end: int = 0, **attrs: int) -> ReadableSpan:
    ctx = trace.SpanContext(trace_id, trace_id + 1000, False)
    return ReadableSpan(name=name, context=ctx, attributes=attrs, start_time=start, end_time=end)


def test_the_rule_keeps_retries_and_slow_attempts_only() -> None:
    rule = TailRule(slower_than=1.0)
    assert rule.reason(span("schedule_pod", 1, end=500_000_000)) == ""
    assert rule.reason(span("schedule_pod", 1, end=1_500_000_000)) == "slow"
    assert rule.reason(span("schedule_pod", 1, **{"splitsched.attempt": 2})) == "retry"
    assert rule.reason(span("schedule_pod", 1, **{"splitsched.attempt": 1})) == ""
    assert TailRule(slower_than=0).reason(span("bind", 1, end=10**12)) == ""  # 0: never slow


def test_what_the_head_sampler_drops_is_recorded_not_sampled() -> None:
    dropped = RecordUnsampled(ALWAYS_OFF).should_sample(None, 1, "schedule_pod")
    assert dropped.decision is Decision.RECORD_ONLY
    assert RecordUnsampled(ALWAYS_ON).should_sample(None, 1, "x").decision is (
        Decision.RECORD_AND_SAMPLE
    )


def test_the_sampled_flag_tells_the_binder() -> None:
    unsampled = f"00-{'ab' * 16}-{'cd' * 8}-02"  # the random-trace-id flag only
    assert sampled_carrier({"traceparent": unsampled})["traceparent"].endswith("-03")
    assert sampled_carrier({"traceparent": "garbage"}) == {"traceparent": "garbage"}
    assert sampled_carrier({}) == {}


def test_the_buffer_releases_a_trace_when_its_root_ends_and_is_bounded() -> None:
    buffer = TraceBuffer(("schedule_pod",), limit=2)
    assert buffer.add(span("filter", 1)) is None
    assert buffer.add(span("filter", 2)) is None
    assert buffer.add(span("filter", 3)) is None  # trace 1 is dropped: the oldest
    released = buffer.add(span("schedule_pod", 1))
    assert released is not None and [s.name for s in released] == ["schedule_pod"]
    released = buffer.add(span("schedule_pod", 3))
    assert released is not None and [s.name for s in released] == ["filter", "schedule_pod"]
