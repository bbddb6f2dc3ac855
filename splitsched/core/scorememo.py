"""Raw scores kept between scheduling cycles, for plugins that score a node by itself.

Consecutive pods of one shape (a Deployment's replicas) are scored against a node table
that changed in only a few rows since the last pod: the plugins whose score of a node
depends on that node and the pod's shape alone (`row_local`) are rescored on those rows
only. Owned by `splitsched.core.algorithm.FrameworkAlgorithm.score`; a memo never
changes a score, only how much of it is computed again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import FloatArray, IntArray, NodeTable


@dataclass(slots=True)
class RawScores:
    """Raw (unnormalised) scores of row-local plugins over all rows for one pod shape."""

    key: tuple[object, ...]
    table: NodeTable
    n: int
    spec_version: int
    mark: int
    raw: dict[str, FloatArray]


def shape_of(pod: models.Pod) -> tuple[object, ...]:
    """What row-local scoring reads of a pod: requests, tolerations, node affinity, images
    (the containers' and the image volumes')."""
    return (
        tuple(sorted(pod.requests.items())),
        pod.containers,
        pod.image_volumes,
        pod.init_containers,
        tuple(sorted(pod.pod_requests.items())),
        tuple(sorted(pod.overhead.items())),
        pod.tolerations,
        pod.node_affinity,
        tuple(sorted(pod.node_selector.items())),
    )


class ScoreMemo:
    """The last pod shape's raw scores, brought up to date on demand."""

    def __init__(self) -> None:
        self._last: RawScores | None = None

    def raw_scores(
        self,
        table: NodeTable,
        profile: framework.Profile,
        state: framework.CycleState,
        pod: models.Pod,
        active: Sequence[framework.ScoreEntry],
    ) -> RawScores | None:
        """Raw scores over every row for the active plugins, rescoring only the rows
        touched since the last pod of the same shape. None when some active plugin looks
        beyond single nodes (spread, inter-pod affinity): then the caller computes
        everything afresh."""
        if any(not getattr(e.plugin, "row_local", False) for e in active):
            return None
        key = (profile.scheduler_name, *shape_of(pod), tuple(e.plugin.name for e in active))
        memo = self._last
        stale: IntArray | None = None
        if (
            memo is not None
            and memo.key == key
            and memo.table is table  # a fresh table (a new snapshot) starts afresh
            and memo.n == table.n
            and memo.spec_version == table.spec_version
        ):
            stale = table.touched_since(memo.mark)
        if memo is None or stale is None:
            memo = self._score_everything(table, key, state, pod, active)
            self._last = memo
            return memo
        if stale.size:
            for entry in active:
                memo.raw[entry.plugin.name][stale] = entry.plugin.score(state, pod, table, stale)
        memo.mark = table.touch_mark
        return memo

    @staticmethod
    def _score_everything(
        table: NodeTable,
        key: tuple[object, ...],
        state: framework.CycleState,
        pod: models.Pod,
        active: Sequence[framework.ScoreEntry],
    ) -> RawScores:
        everything = np.arange(table.n, dtype=np.int64)
        return RawScores(
            key=key,
            table=table,
            n=table.n,
            spec_version=table.spec_version,
            mark=table.touch_mark,
            raw={
                e.plugin.name: np.asarray(
                    e.plugin.score(state, pod, table, everything), dtype=np.float64
                )
                for e in active
            },
        )
