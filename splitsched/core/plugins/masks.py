"""The Filter half shared by plugins whose PreFilter computes a whole-table mask.

Used by `inter_pod_affinity` and `topology_spread`: both compute, in PreFilter, a state
object holding a boolean `mask` over the node table's rows, and answer Filter and
failure reasons from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import numpy as np

from splitsched.core import framework
from splitsched.core.nodetable import BoolArray, NodeTable


class MaskState(Protocol):
    """A PreFilter result with one bool per node-table row (True = the node passes)."""

    @property
    def mask(self) -> BoolArray: ...


S = TypeVar("S", bound=MaskState)


def prefiltered(
    state: framework.CycleState,
    *,
    key: str,
    kind: type[S],
    table: NodeTable,
    compute: Callable[[], S | None],
) -> S | None:
    """The PreFilter state stored under `key` if it was computed for a table of this size,
    else `compute()`: Filter also runs without PreFilter (Explain, preemption's what-ifs)
    and on a table that has grown since."""
    fs = state.read(key)
    if isinstance(fs, kind) and fs.mask.shape[0] == table.n:
        return fs
    return compute()


def mask_or_all(fs: MaskState | None, n: int) -> BoolArray:
    """The state's mask; every node passes when there is no state (nothing to check)."""
    if fs is None:
        return np.ones(n, dtype=np.bool_)
    return fs.mask
