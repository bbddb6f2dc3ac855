"""Simulate's ranking of the scored nodes (`whatif.best_nodes`): the node the answer names
is always listed, first; the rest by total, equal totals by name, whatever the rows' order."""

from __future__ import annotations

import numpy as np

from splitsched.core.results import ScoredNodes
from splitsched.core.whatif import best_nodes


def scored(rows: list[int], totals: list[float]) -> ScoredNodes:
    return ScoredNodes(
        rows=np.asarray(rows, dtype=np.int64),
        total=np.asarray(totals, dtype=np.float64),
        per_plugin={},
    )


def ranked(s: ScoredNodes, names: list[str], *, chosen: str, top: int) -> list[str]:
    table = np.asarray(names, dtype=np.str_)
    return [str(table[s.rows[k]]) for k in best_nodes(s, table, chosen=chosen, top=top)]


def test_a_tie_wider_than_top_lists_the_chosen_node_then_the_others_by_name() -> None:
    # Issue 21: a 4-way tie, topNodes 2, and `node` was a third node, not listed.
    names = ["d", "b", "low", "c", "a"]  # rows in the order the nodes joined the view
    s = scored([0, 1, 2, 3, 4], [50.0, 50.0, 10.0, 50.0, 50.0])
    assert ranked(s, names, chosen="c", top=2) == ["c", "a"]
    assert ranked(s, names, chosen="d", top=3) == ["d", "a", "b"]
    assert ranked(s, names, chosen="a", top=10) == ["a", "b", "c", "d", "low"]


def test_order_depends_on_names_not_rows() -> None:
    forward = scored([0, 1, 2, 3], [70.0, 40.0, 70.0, 90.0])
    names = ["x", "y", "w", "z"]
    backward = scored([3, 2, 1, 0], [90.0, 70.0, 40.0, 70.0])
    expected = ["z", "w", "x", "y"]
    assert ranked(forward, names, chosen="z", top=4) == expected
    assert ranked(backward, names, chosen="z", top=4) == expected


def test_the_chosen_node_is_listed_even_a_hair_below_the_best() -> None:
    # The scheduler's ties are within 1e-9; the chosen node comes first all the same.
    s = scored([0, 1, 2], [80.0 - 1e-12, 80.0, 80.0])
    assert ranked(s, ["c", "a", "b"], chosen="c", top=1) == ["c"]
    assert ranked(s, ["c", "a", "b"], chosen="", top=2) == ["a", "b"]  # none chosen
