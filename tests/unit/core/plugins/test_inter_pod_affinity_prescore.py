"""InterPodAffinity's PreScore tally, before normalisation: the incoming pod's preferred
terms, existing pods' preferred terms (negative for anti-affinity) and existing pods'
required affinity (hardPodAffinityWeight), credited per topology domain."""

from __future__ import annotations

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import NodeTable
from splitsched.core.plugins.inter_pod_affinity import InterPodAffinity

ZONE = "topology.kubernetes.io/zone"


def _term(app: str) -> models.PodAffinityTerm:
    return models.PodAffinityTerm(
        label_selector=models.LabelSelector(match_labels=(("app", app),)), topology_key=ZONE
    )


def _preferred(weight: int, app: str) -> models.PodAffinity:
    return models.PodAffinity(preferred=(models.WeightedPodAffinityTerm(weight, _term(app)),))


def _pod(
    name: str,
    app: str,
    node: str = "",
    *,
    pod_affinity: models.PodAffinity | None = None,
    pod_anti_affinity: models.PodAffinity | None = None,
) -> models.Pod:
    return models.Pod(
        uid=name,
        namespace="default",
        name=name,
        labels={"app": app},
        node_name=node,
        pod_affinity=pod_affinity,
        pod_anti_affinity=pod_anti_affinity,
    )


def _table() -> NodeTable:
    """z1 = {n1, n2}, z2 = {n3}; n4 has no zone label, so nothing on it is credited."""
    table = NodeTable()
    for name, zone in (("n1", "z1"), ("n2", "z1"), ("n3", "z2"), ("n4", None)):
        table.set_node(models.Node(name=name, labels={ZONE: zone} if zone else {}))
    existing = [
        _pod("db1", "db", "n1", pod_affinity=_preferred(5, "web")),
        _pod("db2", "db", "n3", pod_anti_affinity=_preferred(2, "web")),
        _pod("db3", "db", "n2", pod_affinity=models.PodAffinity(required=(_term("web"),))),
        _pod("db4", "db", "n4", pod_affinity=models.PodAffinity(required=(_term("web"),))),
    ]
    for pod in existing:
        assert table.add_pod(pod.node_name, pod)
    return table


def _raw_scores(plugin: InterPodAffinity, pod: models.Pod) -> list[float] | None:
    table = _table()
    state = framework.CycleState()
    rows = np.arange(table.n, dtype=np.int64)
    if plugin.pre_score(state, pod, table, rows).code is framework.Code.SKIP:
        return None
    return [float(s) for s in plugin.score(state, pod, table, rows)]


def test_every_source_is_credited_to_its_domain() -> None:
    web = _pod("web", "web", pod_affinity=_preferred(3, "db"))
    # own term: 3 per db pod in the zone (z1: db1, db3; z2: db2; db4's node has no zone)
    # existing: db1's preferred +5 in z1, db2's preferred anti -2 in z2, db3's required +1
    assert _raw_scores(InterPodAffinity(), web) == [12.0, 12.0, 1.0, 0.0]
    hard_off = InterPodAffinity({"hardPodAffinityWeight": 0})
    assert _raw_scores(hard_off, web) == [11.0, 11.0, 1.0, 0.0]


def test_existing_terms_alone_score_a_pod_without_affinity() -> None:
    assert _raw_scores(InterPodAffinity(), _pod("web", "web")) == [6.0, 6.0, -2.0, 0.0]


def test_nothing_touched_or_ignored_skips() -> None:
    assert _raw_scores(InterPodAffinity(), _pod("other", "other")) is None
    ignore = InterPodAffinity({"ignorePreferredTermsOfExistingPods": True})
    assert _raw_scores(ignore, _pod("web", "web")) is None
