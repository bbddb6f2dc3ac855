"""MaskFilter: the PreFilter/Filter half InterPodAffinity and PodTopologySpread share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable
from splitsched.core.plugins import masks
from tests.support.builders import fresh_state, node, pod, table_of


@dataclass(frozen=True)
class _State:
    mask: BoolArray


class _OddRowsOnly(masks.MaskFilter[_State]):
    """Passes odd rows; nothing to check (None) for pods named "free"."""

    name: ClassVar[str] = "OddRowsOnly"
    prefilter_key: ClassVar[str] = "PreFilterOddRowsOnly"
    state_kind = _State

    def __init__(self) -> None:
        self.computed = 0

    def _filter_state(self, pod: models.Pod, table: NodeTable) -> _State | None:
        self.computed += 1
        if pod.name == "free":
            return None
        return _State(np.arange(table.n) % 2 == 1)


def test_pre_filter_stores_the_state_and_filter_reuses_it() -> None:
    table = table_of([node("a"), node("b"), node("c")])
    plugin, state = _OddRowsOnly(), fresh_state()
    assert plugin.pre_filter(state, pod(), table).code == framework.Code.SUCCESS
    assert plugin.filter(state, pod(), table).tolist() == [False, True, False]
    assert plugin.computed == 1


def test_nothing_to_check_skips_and_every_node_passes() -> None:
    table = table_of([node("a"), node("b")])
    plugin, state = _OddRowsOnly(), fresh_state()
    assert plugin.pre_filter(state, pod("free"), table).code == framework.Code.SKIP
    assert state.read(plugin.prefilter_key) is None
    assert plugin.filter(state, pod("free"), table).tolist() == [True, True]


def test_filter_without_pre_filter_or_on_a_grown_table_computes_again() -> None:
    small = table_of([node("a"), node("b")])
    grown = table_of([node("a"), node("b"), node("c"), node("d")])
    plugin, state = _OddRowsOnly(), fresh_state()
    assert plugin.filter(state, pod(), small).tolist() == [False, True]
    plugin.pre_filter(state, pod(), small)
    assert plugin.filter(state, pod(), grown).tolist() == [False, True, False, True]
    assert plugin.computed == 3
