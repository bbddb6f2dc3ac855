"""Raw scores kept between scheduling cycles, for plugins that score a node by itself.

Consecutive pods of one shape (a Deployment's replicas) are scored against a node table
that changed in only a few rows since the last pod: the plugins whose score of a node
depends on that node and the pod's shape alone (`row_local`) are rescored on those rows
only. A real cluster interleaves a few shapes (request sizes, node affinities), so the
memo keeps the last `SHAPES_KEPT` of them, each brought up to date when its shape comes
back. Owned by `splitsched.core.algorithm.FrameworkAlgorithm.score`; a memo never
changes a score, only how much of it is computed again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import FloatArray, NodeTable, RowsMark

#: Shapes whose raw scores are kept: each costs a float64 per row per row-local plugin
#: (about 2 MiB for four plugins at 65,000 nodes).
SHAPES_KEPT = 32


@dataclass(slots=True)
class RawScores:
    """Raw (unnormalised) scores of row-local plugins over all rows for one pod shape."""

    key: tuple[object, ...]
    mark: RowsMark  # the rows as they stood when `raw` was last brought up to date
    raw: dict[str, FloatArray]


def shape_of(pod: models.Pod) -> tuple[object, ...]:
    """What row-local scoring reads of a pod: requests, tolerations, node affinity, images
    (the containers' and the image volumes'). Hashable: a dict key."""
    return (
        tuple(sorted(pod.requests.items())),
        _containers(pod.containers),
        pod.image_volumes,
        _containers(pod.init_containers),
        tuple(sorted(pod.pod_requests.items())),
        tuple(sorted(pod.overhead.items())),
        pod.tolerations,
        pod.node_affinity,
        tuple(sorted(pod.node_selector.items())),
    )


def _containers(containers: Sequence[models.Container]) -> tuple[object, ...]:
    """Containers as equal-if-equal tuples (their requests are dicts)."""
    return tuple(
        (c.name, tuple(sorted(c.requests.items())), c.host_ports, c.restart_policy, c.image)
        for c in containers
    )


class ScoreMemo:
    """The raw scores of the last `SHAPES_KEPT` pod shapes, least recently used dropped
    first; each brought up to date on demand."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[object, ...], RawScores] = OrderedDict()
        self._table: NodeTable | None = None  # the table every kept memo scored

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
        if table is not self._table:  # a fresh table (a new snapshot) starts afresh
            self._kept.clear()
            self._table = table
        key = (profile.scheduler_name, *shape_of(pod), tuple(e.plugin.name for e in active))
        memo = self._kept.get(key)
        stale = None if memo is None else table.stale_rows(memo.mark)
        if memo is None or stale is None:
            memo = self._score_everything(table, key, state, pod, active)
            self._kept[key] = memo
            if len(self._kept) > SHAPES_KEPT:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        if stale is None:
            return memo
        if stale.size:
            for entry in active:
                memo.raw[entry.plugin.name][stale] = entry.plugin.score(state, pod, table, stale)
        memo.mark = table.rows_mark()
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
            mark=table.rows_mark(),
            raw={
                e.plugin.name: np.asarray(
                    e.plugin.score(state, pod, table, everything), dtype=np.float64
                )
                for e in active
            },
        )
