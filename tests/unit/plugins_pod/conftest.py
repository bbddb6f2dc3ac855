"""Builders for the pod-topology plugin tests: nodes, pods and a NodeTable holding them.

`splitsched.core.plugins/__init__.py` imports every plugin module; while some are still being
written it may not import, so this conftest falls back to a bare package object pointing at
the plugins folder, letting these tests import their own modules directly.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from splitsched.core import models
from splitsched.core.nodetable import NodeTable

try:
    import splitsched.core.plugins  # noqa: F401
except ImportError:  # another plugin module has not landed yet
    _pkg = types.ModuleType("splitsched.core.plugins")
    _pkg.__path__ = [str(Path(models.__file__).parent / "plugins")]
    sys.modules["splitsched.core.plugins"] = _pkg

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def mk_node(
    name: str,
    *,
    zone: str | None = None,
    hostname: bool = True,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[models.Taint] = (),
) -> models.Node:
    """A node labelled with its hostname (unless told not to) and zone (when given)."""
    all_labels = dict(labels or {})
    if hostname:
        all_labels[HOSTNAME] = name
    if zone is not None:
        all_labels[ZONE] = zone
    return models.Node(name=name, labels=all_labels, taints=tuple(taints))


def mk_pod(
    name: str,
    *,
    node: str = "",
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    **fields: object,
) -> models.Pod:
    return models.Pod(
        uid=f"uid-{namespace}-{name}",
        namespace=namespace,
        name=name,
        labels=dict(labels or {}),
        node_name=node,
        **fields,  # type: ignore[arg-type]
    )


def build_table(nodes: Iterable[models.Node], pods: Iterable[models.Pod] = ()) -> NodeTable:
    """A table with the nodes, then every pod added to the node its node_name names."""
    table = NodeTable()
    for n in nodes:
        table.set_node(n)
    for p in pods:
        assert table.add_pod(p.node_name, p), f"pod {p.name} names unknown node {p.node_name}"
    return table


def selector(**match_labels: str) -> models.LabelSelector:
    return models.LabelSelector(match_labels=tuple(sorted(match_labels.items())))


def exists(key: str) -> models.LabelSelector:
    return models.LabelSelector(
        match_expressions=(models.LabelSelectorRequirement(key=key, operator="Exists"),)
    )


# ---- random small clusters for the property tests ------------------------------------------
TAINT_HARD = models.Taint("dedicated", "x", "NoSchedule")
TAINT_SOFT = models.Taint("soft", "", "PreferNoSchedule")
APP_VALUES = ("a", "b", None)
SELECTORS: tuple[models.LabelSelector | None, ...] = (
    selector(app="a"),
    selector(app="b"),
    exists("app"),
    models.LabelSelector(),
    None,
)


def random_nodes(draw: Any) -> list[models.Node]:
    """1-6 nodes, each maybe zoned, maybe hostname-labelled, maybe tainted, maybe ssd."""
    count = draw(st.integers(1, 6))
    out = []
    for i in range(count):
        out.append(
            mk_node(
                f"n{i}",
                zone=draw(st.sampled_from(("z1", "z2", "z3", None))),
                hostname=draw(st.integers(0, 5)) > 0,
                labels={"disk": "ssd"} if draw(st.booleans()) else {},
                taints=draw(st.sampled_from(((), (TAINT_HARD,), (TAINT_HARD,), (TAINT_SOFT,)))),
            )
        )
    return out


def random_term(
    draw: Any, *, key_choices: Sequence[str] = (ZONE, HOSTNAME)
) -> models.PodAffinityTerm:
    ns_choice = draw(st.sampled_from(("own", "other", "all")))
    return models.PodAffinityTerm(
        label_selector=draw(st.sampled_from(SELECTORS)),
        topology_key=draw(st.sampled_from(tuple(key_choices))),
        namespaces=("other",) if ns_choice == "other" else (),
        namespace_selector=models.LabelSelector() if ns_choice == "all" else None,
    )


def random_labels(draw: Any) -> dict[str, str]:
    labels: dict[str, str] = {}
    app = draw(st.sampled_from(APP_VALUES))
    if app is not None:
        labels["app"] = app
    if draw(st.booleans()):
        labels["rev"] = draw(st.sampled_from(("1", "2")))
    return labels


def random_pods(draw: Any, node_names: Sequence[str]) -> list[models.Pod]:
    """0-12 assigned pods; some carry required (anti-)affinity terms of their own."""
    count = draw(st.integers(0, 12))
    out = []
    for i in range(count):
        anti = (random_term(draw),) if draw(st.integers(0, 3)) == 0 else ()
        out.append(
            mk_pod(
                f"e{i}",
                node=draw(st.sampled_from(tuple(node_names))),
                namespace=draw(st.sampled_from(("default", "other"))),
                labels=random_labels(draw),
                deleting=draw(st.integers(0, 5)) == 0,
                pod_anti_affinity=models.PodAffinity(required=anti) if anti else None,
            )
        )
    return out


@st.composite
def clusters(draw: Any) -> tuple[list[models.Node], list[models.Pod]]:
    nodes = random_nodes(draw)
    return nodes, random_pods(draw, [n.name for n in nodes])


def add_remove_churn(table: NodeTable, pods: Sequence[models.Pod]) -> None:
    """Remove and re-add every other pod so the indexes go through both directions."""
    for p in pods[::2]:
        table.remove_pod(p.node_name, p.uid)
    for p in pods[::2]:
        table.add_pod(p.node_name, p)
