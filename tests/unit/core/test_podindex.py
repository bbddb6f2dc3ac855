"""PodIndex: the pod groups and affinity terms the pod-topology plugins read, counted per
node and kept exact as pods come and go."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core import models, podindex
from splitsched.core.podindex import (
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    PodIndex,
    owner_key,
    required_pair,
    with_label_keys,
)

TERM = models.PodAffinityTerm(
    label_selector=models.LabelSelector(match_labels=(("app", "db"),)),
    topology_key="zone",
    match_label_keys=("version",),
)


def _pod(
    name: str, app: str, *, version: str = "1", owner: str = "", affinity: bool = False
) -> models.Pod:
    return models.Pod(
        uid=name,
        namespace="default",
        name=name,
        labels={"app": app, "version": version},
        owner=models.OwnerRef("ReplicaSet", owner, f"uid-{owner}") if owner else None,
        pod_affinity=models.PodAffinity(
            required=(TERM,), preferred=(models.WeightedPodAffinityTerm(7, TERM),)
        )
        if affinity
        else None,
        pod_anti_affinity=models.PodAffinity(preferred=(models.WeightedPodAffinityTerm(3, TERM),))
        if affinity
        else None,
    )


def test_pods_that_look_alike_share_a_group() -> None:
    index = PodIndex()
    index.count("n1", _pod("a", "web", owner="rs"), 1)
    index.count("n2", _pod("b", "web", owner="rs"), 1)
    index.count("n2", _pod("c", "web", owner="rs"), 1)
    index.count("n1", _pod("d", "web"), 1)  # no owner: another group
    groups = sorted((g.owner, g.on_node) for g in index.groups.values())
    assert groups == [("", {"n1": 1}), ("uid-rs", {"n1": 1, "n2": 2})]
    index.count("n2", _pod("c", "web", owner="rs"), -1)
    index.count("n1", _pod("d", "web"), -1)
    assert [g.on_node for g in index.groups.values()] == [{"n1": 1, "n2": 1}]


def test_affinity_terms_are_keyed_by_weight_namespace_and_own_label_values() -> None:
    index = PodIndex()
    index.count("n1", _pod("a", "web", version="1", affinity=True), 1)
    index.count("n2", _pod("b", "web", version="2", affinity=True), 1)
    required = index.affinity_terms[REQUIRED_AFFINITY]
    assert sorted(key[2] for key in required) == [(("version", "1"),), (("version", "2"),)]
    assert [key[0] for key in index.affinity_terms[PREFERRED_ANTI_AFFINITY]] == [3, 3]
    index.count("n1", _pod("a", "web", version="1", affinity=True), -1)
    assert list(required.values()) == [{"n2": 1}]


def test_counts_by_row_follows_the_rows_of_the_node_names() -> None:
    index = PodIndex()
    for name, node in (("a", "n1"), ("b", "n2"), ("c", "n2"), ("d", "n3")):
        index.count(node, _pod(name, "web" if name != "d" else "db", owner="rs"), 1)
    row_of = {"n3": 0, "n2": 1, "n1": 2}
    counts = index.counts_by_row(lambda g: g.labels["app"] == "web", row_of, 4, layout=0)
    assert counts.tolist() == [0, 2, 1, 0]
    assert index.counts_by_row(lambda g: False, row_of, 4, layout=0).dtype == np.int64


def test_with_label_keys_and_owner_key() -> None:
    sel = with_label_keys(TERM.label_selector, {"version": "2"}, match_keys=("version", "x"))
    assert sel is not None
    assert sel.matches({"app": "db", "version": "2"})
    assert not sel.matches({"app": "db", "version": "1"})
    assert with_label_keys(None, {"version": "2"}, match_keys=("version",)) is None
    assert owner_key(_pod("a", "web")) == ""
    assert owner_key(_pod("a", "web", owner="rs")) == "uid-rs"


PODS = [
    _pod(f"p{i}", app, version=v, owner=o, affinity=aff)
    for i, (app, v, o, aff) in enumerate(
        [("web", "1", "rs", True), ("web", "1", "rs", False), ("db", "2", "", True)]
    )
]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(range(len(PODS))), st.sampled_from(["n1", "n2"])), max_size=12
    )
)
def test_removing_what_was_added_leaves_what_a_fresh_index_holds(
    placements: list[tuple[int, str]],
) -> None:
    index = PodIndex()
    for i, node in placements:
        index.count(node, PODS[i], 1)
    kept = placements[: len(placements) // 2]
    for i, node in placements[len(placements) // 2 :]:
        index.count(node, PODS[i], -1)
    fresh = PodIndex()
    for i, node in kept:
        fresh.count(node, PODS[i], 1)
    assert index.groups == fresh.groups
    assert index.affinity_terms == fresh.affinity_terms


# ---- lookups by a required label -----------------------------------------------------
_LABELS = st.dictionaries(
    st.sampled_from(["app", "tier", "anti"]), st.sampled_from(["a", "b", "c"]), max_size=3
)
_SELECTORS = st.one_of(
    st.none(),
    st.builds(
        lambda pairs, exprs: models.LabelSelector(
            match_labels=tuple(sorted(pairs.items())), match_expressions=tuple(exprs)
        ),
        _LABELS,
        st.lists(
            st.builds(
                models.LabelSelectorRequirement,
                st.sampled_from(["app", "tier", "anti"]),
                st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
                st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2).map(tuple),
            ),
            max_size=2,
        ),
    ),
)


def _anti_pod(
    name: str, labels: dict[str, str], selector: models.LabelSelector | None
) -> models.Pod:
    term = models.PodAffinityTerm(label_selector=selector, topology_key="kubernetes.io/hostname")
    return models.Pod(
        uid=name,
        namespace="default",
        name=name,
        labels=labels,
        pod_anti_affinity=models.PodAffinity(required=(term,)),
    )


@settings(max_examples=200, deadline=None)
@given(
    existing=st.lists(st.tuples(_LABELS, _SELECTORS), min_size=1, max_size=8),
    removed=st.integers(min_value=0, max_value=8),
    incoming=_LABELS,
    selector=_SELECTORS,
)
def test_lookups_by_required_label_miss_nothing_a_full_scan_finds(
    existing: list[tuple[dict[str, str], models.LabelSelector | None]],
    removed: int,
    incoming: dict[str, str],
    selector: models.LabelSelector | None,
) -> None:
    """The narrowed lookups (anti-affinity candidates, counts by a required label) find
    every term and group a scan of all of them finds, also after pods leave."""
    index = PodIndex()
    pods = [_anti_pod(f"p{i}", labels, sel) for i, (labels, sel) in enumerate(existing)]
    for i, pod in enumerate(pods):
        index.count(f"n{i % 3}", pod, 1)
    for pod in pods[:removed]:
        index.count(f"n{pods.index(pod) % 3}", pod, -1)

    candidates = set(index.anti_affinity_candidates(incoming))
    for key in index.affinity_terms[REQUIRED_ANTI_AFFINITY]:
        sel = key[3].label_selector
        if sel is not None and sel.matches(incoming):
            assert key in candidates

    rows = {"n0": 0, "n1": 1, "n2": 2}
    matches = (lambda g: selector.matches(g.labels)) if selector is not None else (lambda g: False)
    full = index.counts_by_row(matches, rows, 3, layout=0)
    narrowed = index.counts_by_row(matches, rows, 3, layout=0, required=required_pair(selector))
    assert full.tolist() == narrowed.tolist()


@pytest.mark.parametrize("dense_from", [1, 32])
def test_cached_rows_follow_pods_and_row_layouts(
    dense_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's per-row vector follows its pods (by row, or rebuilt when the row is not
    given) and is rebuilt when the rows move."""
    monkeypatch.setattr(podindex, "DENSE_GROUP_NODES", dense_from)
    index = PodIndex()
    for i, node in enumerate(["n0", "n1", "n2", "n1"]):
        index.count(node, _pod(f"p{i}", "web", owner="rs"), 1, row=int(node[1]))
    web = lambda g: g.labels["app"] == "web"  # noqa: E731
    rows = {"n0": 0, "n1": 1, "n2": 2}
    assert index.counts_by_row(web, rows, 3, layout=0).tolist() == [1, 2, 1]
    index.count("n1", _pod("p1", "web", owner="rs"), -1, row=1)
    assert index.counts_by_row(web, rows, 3, layout=0).tolist() == [1, 1, 1]
    index.count("n2", _pod("p5", "web", owner="rs"), 1)  # row unknown
    assert index.counts_by_row(web, rows, 3, layout=0).tolist() == [1, 1, 2]
    moved = {"n2": 0, "n1": 1, "n0": 2}  # n0 removed and re-added: rows moved
    assert index.counts_by_row(web, moved, 3, layout=1).tolist() == [2, 1, 1]
    index.count("n0", _pod("p4", "web", owner="rs"), 1, row=2)
    assert index.counts_by_row(web, moved, 3, layout=1).tolist() == [2, 1, 2]
    grown = {**moved, "n3": 3}
    assert index.counts_by_row(web, grown, 4, layout=2).tolist() == [2, 1, 2, 0]


_TALLY_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "drop_node", "add_node", "ask"]),
        st.integers(min_value=0, max_value=5),  # a node (or pod, for remove)
        st.sampled_from(["a", "b"]),  # the pod's app label
        st.booleans(),  # deleting
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops=_TALLY_OPS)
def test_kept_counts_equal_a_fresh_count_whatever_happens_in_between(
    ops: list[tuple[str, int, str, bool]],
) -> None:
    """Counts kept under a key and updated pod by pod (and node by node) are what a fresh
    walk over the groups counts, after any mix of pods and nodes coming and going."""
    from splitsched.core.nodetable import NodeTable

    table = NodeTable()
    for i in range(4):
        table.set_node(models.Node(name=f"n{i}", allocatable={models.PODS: 100}))
    queries = {
        ("app", "a"): lambda g: g.labels.get("app") == "a" and not g.deleting,
        ("app", "b"): lambda g: g.labels.get("app") == "b",
        None: lambda g: g.deleting,
    }
    placed: list[tuple[str, models.Pod]] = []
    for step, (op, arg, app, deleting) in enumerate(ops):
        if op == "add" and table.n:
            node = table.names[arg % table.n]
            pod = models.Pod(
                uid=f"p{step}", namespace="d", name=f"p{step}",
                labels={"app": app}, deleting=deleting,
            )  # fmt: skip
            table.add_pod(node, pod)
            placed.append((node, pod))
        elif op == "remove" and placed:
            node, pod = placed.pop(arg % len(placed))
            table.remove_pod(node, pod.uid)
        elif op == "drop_node" and table.n:
            gone = table.names[arg % table.n]
            table.remove_node(gone)
            placed = [(node, pod) for node, pod in placed if node != gone]
        elif op == "add_node":
            table.set_node(models.Node(name=f"m{step}", allocatable={models.PODS: 100}))
        if op != "ask" and step != len(ops) - 1:
            continue  # the kept counts follow the pods until asked again
        for pair, match in queries.items():
            kept = table.pod_counts_by_row(match, required=pair, key=("test", pair))
            fresh = table.pod_counts_by_row(match, required=pair)
            assert kept.tolist() == fresh.tolist()


def test_kept_counts_are_read_only_and_the_least_recently_used_go_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(podindex, "TALLIES_KEPT", 2)
    index = PodIndex()
    index.count("n0", _pod("p0", "web"), 1, row=0)
    web = lambda g: g.labels["app"] == "web"  # noqa: E731
    rows = {"n0": 0}
    counts = index.counts_by_row(web, rows, 1, layout=0, key="web")
    with pytest.raises(ValueError, match="read-only"):
        counts[0] = 5
    index.counts_by_row(web, rows, 1, layout=0, key="other")
    index.counts_by_row(web, rows, 1, layout=0, key="web")  # "other" is now the oldest
    index.counts_by_row(web, rows, 1, layout=0, key="third")
    assert list(index._tallies) == ["web", "third"]
    index.count("n0", _pod("p1", "web"), 1, row=0)
    assert index.counts_by_row(web, rows, 1, layout=0, key="web").tolist() == [2]
