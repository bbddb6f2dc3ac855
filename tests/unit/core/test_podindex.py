"""PodIndex: the pod groups and affinity terms the pod-topology plugins read, counted per
node and kept exact as pods come and go."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core import models
from splitsched.core.podindex import (
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    PodIndex,
    owner_key,
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
    counts = index.counts_by_row(lambda g: g.labels["app"] == "web", row_of, 4)
    assert counts.tolist() == [0, 2, 1, 0]
    assert index.counts_by_row(lambda g: False, row_of, 4).dtype == np.int64


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
