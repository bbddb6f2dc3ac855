"""What-if sessions: place pods on the live view for a moment, then put everything back.

Explain and Simulate ask "what would the scheduler do?" against the cluster as the
scheduler sees it right now, without copying the view. A session (`session`, reached as
`FrameworkAlgorithm.what_if()`) places pods as a scheduling cycle would (Reserve and
Permit included), so each pod sees the ones before it, and on exit undoes every placement
through the algorithm's one undo path (`FrameworkAlgorithm.forget`: Unreserve, then the
cache forgets) and restores the random tie-breaker: the view, the plugins' reservations and
the next real cycle's choices are exactly as before, also when the block raises. The
scheduler's API never assumes or forgets on the live cache itself; it opens a session.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from splitsched.core import models
from splitsched.core.explain import explain_pod
from splitsched.core.results import (
    Explanation,
    ScheduleResult,
    ScoredNodes,
    WaitInfo,
    rejected_by_status,
)

if TYPE_CHECKING:
    from splitsched.core.algorithm import FrameworkAlgorithm

GANG_NOT_PLACED = "the gang does not fit as a whole"


class Placement(NamedTuple):
    """Where a what-if put one pod: `result` as a cycle would return it, and the scores of
    every feasible node when it was placed."""

    pod: models.Pod
    result: ScheduleResult
    scored: ScoredNodes | None


class WhatIf:
    """One session's placements; undone when the session ends."""

    def __init__(self, algo: FrameworkAlgorithm) -> None:
        self._algo = algo
        self._placed: list[str] = []

    def place(self, pod: models.Pod) -> Placement:
        """Schedule the pod as the scheduler would and, if it fits, assume it there (Reserve
        and Permit run) so the pods placed after it see it."""
        algo = self._algo
        result = algo.schedule(pod)
        profile = algo.profile_for(pod)
        if result.bind is None or profile is None:
            return Placement(pod, result, None)
        scored = algo.scored_nodes(profile, pod)
        status = algo.assume(pod, result.bind.node, result.state)
        if not status.ok:  # a Reserve or Permit plugin said no; `assume` undid it
            rejected = rejected_by_status(status, algo.table.n)
            return Placement(pod, ScheduleResult(wait=rejected), None)
        self._placed.append(pod.uid)
        return Placement(pod, result, scored)

    def explain(self, pod: models.Pod) -> Explanation:
        """Every filter's verdict on every node, with this session's placements counted."""
        return explain_pod(self._algo, pod)

    def undo(self) -> None:
        """Forget every placement, newest first (Unreserve included)."""
        while self._placed:
            self._algo.forget(self._placed.pop())


def best_nodes(
    scored: ScoredNodes, names: npt.NDArray[np.str_], *, chosen: str, top: int
) -> list[int]:
    """The `top` best of the scored nodes (indices into `scored`; `names` the view's node
    names by row), best first: `chosen`, the node the answer names (the scheduler picked it
    at random among the best), then by total, equal totals by name. So the answer's node is
    always listed, and which of more ties than `top` make the cut does not depend on the
    order the nodes joined the view."""
    totals, node_names = scored.total, names[scored.rows]
    others = node_names != chosen
    candidates = np.arange(totals.size)
    if totals.size > top:  # only `chosen`, the `top` best totals and their ties can make it
        cut = np.partition(totals, totals.size - top)[totals.size - top]
        candidates = np.flatnonzero((totals >= cut) | ~others)
    order = np.lexsort((node_names[candidates], -totals[candidates], others[candidates]))
    return [int(k) for k in candidates[order[:top]]]


@contextlib.contextmanager
def session(algo: FrameworkAlgorithm) -> Iterator[WhatIf]:
    """A what-if session on the live view; sessions nest (each undoes its own)."""
    saved_rng = algo.rng.getstate()
    view = WhatIf(algo)
    try:
        yield view
    finally:
        view.undo()
        algo.rng.setstate(saved_rng)


def simulate(
    algo: FrameworkAlgorithm, pods: Iterable[models.Pod], *, gang: bool = False
) -> list[Placement]:
    """Place pods one after another as the scheduler would, each seeing the ones before it,
    then undo every placement. With `gang`, a pod that fits nowhere makes the whole group
    unplaced."""
    with session(algo) as view:
        results = [view.place(pod) for pod in pods]
    if not gang or all(r.result.bind is not None for r in results):
        return results
    not_placed = ScheduleResult(
        wait=WaitInfo(
            summary=GANG_NOT_PLACED,
            reason_counts={},
            failed_plugins=frozenset({"Gang"}),
            total_nodes=algo.table.n,
        )
    )
    return [
        Placement(r.pod, r.result if r.result.bind is None else not_placed, r.scored)
        for r in results
    ]
