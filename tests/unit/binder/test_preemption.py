"""One result for a nomination and its victims' evictions (``preemption.summarize``)."""

from __future__ import annotations

from services.binder.jobs import (
    BOUND,
    DEADLINE_EXCEEDED,
    FAILED,
    BindResult,
    Eviction,
    EvictionState,
    PodKey,
    PreemptJob,
)
from services.binder.preemption import summarize

V1, V2, V3 = (PodKey("ns", f"v{i}", f"u{i}") for i in (1, 2, 3))
JOB = PreemptJob("p1", PodKey("ns", "high", "uh"), "node-a", (V1, V2, V3), deadline=0.0)
NOMINATED = BindResult(BOUND, "", 1, 200)


def eviction(
    victim: PodKey, state: EvictionState, message: str = "", status: int = 201
) -> Eviction:
    return Eviction(victim, state, message, 0 if state is EvictionState.SKIPPED else 1, status)


def test_every_victim_evicted_or_gone() -> None:
    result = summarize(
        JOB,
        [
            eviction(V1, EvictionState.EVICTED),
            eviction(V2, EvictionState.GONE, "already gone", 404),
            eviction(V3, EvictionState.EVICTED),
        ],
        nominated=NOMINATED,
    )
    assert result.done == BindResult(BOUND, "preempted 3 victims (1 already gone)", 4, 201)
    assert result.evicted == (V1, V3)


def test_a_refusal_fails_the_preemption_and_names_what_was_left_alone() -> None:
    result = summarize(
        JOB,
        [
            eviction(V1, EvictionState.EVICTED),
            eviction(V2, EvictionState.REFUSED, "eviction of ns/v2 refused: pdb", 429),
            eviction(V3, EvictionState.SKIPPED, "not attempted", 0),
        ],
        nominated=NOMINATED,
    )
    assert result.done == BindResult(
        FAILED,
        "eviction of ns/v2 refused: pdb; evicted 1 of 3 victims, 1 not attempted",
        3,
        429,
    )
    assert result.evicted == (V1,)


def test_a_refusal_outranks_a_deadline() -> None:
    result = summarize(
        JOB,
        [
            eviction(V1, EvictionState.DEADLINE, "eviction of ns/v1: deadline exceeded", 503),
            eviction(V2, EvictionState.REFUSED, "eviction of ns/v2 refused: pdb", 429),
            eviction(V3, EvictionState.EVICTED),
        ],
        nominated=NOMINATED,
    )
    assert result.done.result == FAILED
    deadline_only = summarize(
        JOB,
        [
            eviction(V1, EvictionState.DEADLINE, "eviction of ns/v1: deadline exceeded", 503),
            eviction(V2, EvictionState.EVICTED),
            eviction(V3, EvictionState.EVICTED),
        ],
        nominated=NOMINATED,
    )
    assert deadline_only.done.result == DEADLINE_EXCEEDED
    assert deadline_only.done.last_http_status == 503


def test_one_victim() -> None:
    job = PreemptJob("p2", JOB.preemptor, "node-a", (V1,), deadline=0.0)
    result = summarize(job, [eviction(V1, EvictionState.EVICTED)], nominated=NOMINATED)
    assert result.done.message == "preempted 1 victim"
