"""The PreFilter/Filter half shared by plugins whose PreFilter computes a whole-table mask.

Used by `inter_pod_affinity` and `topology_spread`: both compute, in PreFilter, a state
object holding a boolean `mask` over the node table's rows, and answer Filter and
failure reasons from it. `MaskFilter` is that half, written once.
"""

from __future__ import annotations

from typing import ClassVar, Generic, Protocol, TypeVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable


class MaskState(Protocol):
    """A PreFilter result with one bool per node-table row (True = the node passes)."""

    @property
    def mask(self) -> BoolArray: ...


S = TypeVar("S", bound=MaskState)


class MaskFilter(Generic[S]):
    """PreFilter stores the state `_filter_state` computes under `prefilter_key` (SKIP when
    there is nothing to check); Filter answers from it. Subclasses name the key, the state's
    type (`state_kind`) and compute it."""

    prefilter_key: ClassVar[str]
    state_kind: type[S]

    def _filter_state(self, pod: models.Pod, table: NodeTable) -> S | None:
        raise NotImplementedError

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        fs = self._filter_state(pod, table)
        if fs is None:
            return framework.Status.skip()
        state.write(self.prefilter_key, fs)
        return framework.Status.success()

    def _get_filter_state(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> S | None:
        """The PreFilter state if it was computed for a table of this size, else computed
        now: Filter also runs without PreFilter (Explain, preemption's what-ifs) and on a
        table that has grown since."""
        fs = state.read(self.prefilter_key)
        if isinstance(fs, self.state_kind) and fs.mask.shape[0] == table.n:
            return fs
        return self._filter_state(pod, table)

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        """The state's mask; every node passes when there is no state (nothing to check)."""
        fs = self._get_filter_state(state, pod, table)
        if fs is None:
            return np.ones(table.n, dtype=np.bool_)
        return fs.mask
