"""NodeTable.recently: values keyed by what pods ask, kept while the node specs stand and
bounded in number."""

from __future__ import annotations

import dataclasses

import pytest

from splitsched.core import models, specmemo
from splitsched.core.nodetable import NodeTable
from splitsched.core.plugins.node_affinity import node_matches_mask


def _table() -> NodeTable:
    table = NodeTable()
    for i in range(3):
        table.set_node(models.Node(name=f"n{i}", labels={"pool": f"p{i % 2}"}))
    return table


def test_recent_values_are_computed_once_and_the_least_recently_used_go_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(specmemo, "RECENT_KEPT", 2)
    table = _table()
    computed: list[str] = []

    def value(name: str) -> str:
        table.recently((name,), lambda: computed.append(name) or name)  # type: ignore[func-returns-value]
        return name

    for name in ("a", "b", "a", "c", "a", "b"):
        value(name)
    assert computed == ["a", "b", "c", "b"]  # b went when c came (a was used since)


def test_a_node_spec_change_drops_what_was_kept() -> None:
    table = _table()
    pod = models.Pod(uid="u", namespace="d", name="p", node_selector={"pool": "p0"})
    assert node_matches_mask(table, pod).tolist() == [True, False, True]
    node = table.nodes[1]
    table.set_node(dataclasses.replace(node, labels={"pool": "p0"}))
    assert node_matches_mask(table, pod).tolist() == [True, True, True]
    table.set_node(models.Node(name="n3", labels={"pool": "p1"}))
    assert node_matches_mask(table, pod).tolist() == [True, True, True, False]


def test_a_kept_mask_is_handed_out_as_a_copy() -> None:
    table = _table()
    pod = models.Pod(uid="u", namespace="d", name="p", node_selector={"pool": "p0"})
    node_matches_mask(table, pod)[:] = False
    assert node_matches_mask(table, pod).tolist() == [True, False, True]
