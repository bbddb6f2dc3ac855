"""InterPodAffinity: Filter and Score against kube-scheduler's semantics (cases modelled on
interpodaffinity/filtering_test.go and scoring_test.go, expectations derived by hand)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core import framework, models
from splitsched.core.nodetable import NodeTable
from splitsched.core.plugins.inter_pod_affinity import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
)
from splitsched.core.podindex import REQUIRED_ANTI_AFFINITY
from tests.support import builders
from tests.support.builders import (
    HOSTNAME,
    ZONE,
    add_remove_churn,
    clusters,
    random_labels,
    random_namespace_labels,
    random_term,
    selector,
)


def term(
    key: str = HOSTNAME, sel: models.LabelSelector | None = None, **kw: Any
) -> models.PodAffinityTerm:
    return models.PodAffinityTerm(
        label_selector=selector(app="db") if sel is None else sel, topology_key=key, **kw
    )


def affinity(
    *required: models.PodAffinityTerm, preferred: Sequence[tuple[int, models.PodAffinityTerm]] = ()
) -> models.PodAffinity:
    return models.PodAffinity(
        required=required,
        preferred=tuple(models.WeightedPodAffinityTerm(w, t) for w, t in preferred),
    )


def nodes() -> list[models.Node]:
    return [
        builders.node("n1", hostname=True, zone="z1"),
        builders.node("n2", hostname=True, zone="z1"),
        builders.node("n3", hostname=True, zone="z2"),
        builders.node("n4", hostname=True, zone="z2"),
    ]


def run_filter(
    pod: models.Pod, table: NodeTable, plugin: InterPodAffinity | None = None
) -> dict[str, bool]:
    plugin = plugin or InterPodAffinity()
    state = framework.CycleState()
    status = plugin.pre_filter(state, pod, table)
    mask = plugin.filter(state, pod, table)
    if status.code is framework.Code.SKIP:
        assert mask.all()
    return {name: bool(mask[row]) for name, row in table.row_of.items()}


def reasons(pod: models.Pod, table: NodeTable) -> dict[str, str]:
    plugin = InterPodAffinity()
    state = framework.CycleState()
    plugin.pre_filter(state, pod, table)
    mask = plugin.filter(state, pod, table)
    rows = [int(r) for r in np.flatnonzero(~mask)]
    got = plugin.failure_reasons(state, pod, table, rows)
    return {table.names[r]: rs[0] for r, rs in zip(rows, got, strict=True)}


def run_score(
    pod: models.Pod, table: NodeTable, args: Mapping[str, Any] | None = None
) -> dict[str, float] | None:
    plugin = InterPodAffinity(args)
    state = framework.CycleState()
    rows = np.arange(table.n, dtype=np.int64)
    if plugin.pre_score(state, pod, table, rows).code is framework.Code.SKIP:
        return None
    final = plugin.normalize(state, pod, plugin.score(state, pod, table, rows))
    return {table.names[int(r)]: float(s) for r, s in zip(rows, final, strict=True)}


def db(name: str, node: str, **kw: Any) -> models.Pod:
    return builders.pod(name, node=node, labels={"app": "db"}, **kw)


# ---- PreFilter skip ------------------------------------------------------------------------
def test_prefilter_skips_pod_without_terms_in_cluster_without_required_anti_affinity() -> None:
    pref_only = affinity(preferred=[(5, term())])
    table = builders.table_of(nodes(), [db("d", "n1", pod_affinity=pref_only)])
    plugin = InterPodAffinity()
    state = framework.CycleState()
    pod = builders.pod("p", labels={"app": "web"})
    assert plugin.pre_filter(state, pod, table).code is framework.Code.SKIP
    assert plugin.filter(state, pod, table).all()


def test_prefilter_runs_when_an_existing_pod_has_required_anti_affinity() -> None:
    table = builders.table_of(nodes(), [db("d", "n1", pod_anti_affinity=affinity(term()))])
    assert table.affinity_terms[REQUIRED_ANTI_AFFINITY]
    plugin = InterPodAffinity()
    status = plugin.pre_filter(framework.CycleState(), builders.pod("p"), table)
    assert status.code is framework.Code.SUCCESS
    table.remove_pod("n1", "uid-default-d")
    assert not table.affinity_terms[REQUIRED_ANTI_AFFINITY]


# ---- required affinity ---------------------------------------------------------------------
def test_affinity_satisfied_in_the_zone_of_a_matching_pod() -> None:
    table = builders.table_of(nodes(), [db("d", "n2")])
    pod = builders.pod("p", labels={"app": "web"}, pod_affinity=affinity(term(ZONE)))
    assert run_filter(pod, table) == {"n1": True, "n2": True, "n3": False, "n4": False}
    assert reasons(pod, table) == {"n3": REASON_AFFINITY, "n4": REASON_AFFINITY}


def test_affinity_by_hostname_only_the_node_of_the_matching_pod() -> None:
    table = builders.table_of(
        nodes(), [db("d", "n3"), builders.pod("w", node="n1", labels={"app": "web"})]
    )
    pod = builders.pod("p", pod_affinity=affinity(term(HOSTNAME)))
    assert run_filter(pod, table) == {"n1": False, "n2": False, "n3": True, "n4": False}


def test_affinity_unsatisfied_when_no_pod_matches_and_pod_does_not_match_itself() -> None:
    table = builders.table_of(nodes(), [builders.pod("w", node="n1", labels={"app": "web"})])
    pod = builders.pod("p", labels={"app": "web"}, pod_affinity=affinity(term(ZONE)))
    assert not any(run_filter(pod, table).values())


def test_first_pod_of_a_self_affine_group_is_allowed_where_keys_exist() -> None:
    table = builders.table_of(
        [*nodes(), builders.node("n5", hostname=True)],
        [builders.pod("w", node="n1", labels={"app": "x"})],
    )
    pod = builders.pod("p", labels={"app": "db"}, pod_affinity=affinity(term(ZONE)))
    # No pod matches anywhere, the pod matches its own term: every node with a zone fits.
    assert run_filter(pod, table) == {"n1": True, "n2": True, "n3": True, "n4": True, "n5": False}


def test_first_pod_exception_ends_once_a_matching_pod_exists() -> None:
    table = builders.table_of(nodes(), [db("d", "n3")])
    pod = builders.pod("p", labels={"app": "db"}, pod_affinity=affinity(term(ZONE)))
    assert run_filter(pod, table) == {"n1": False, "n2": False, "n3": True, "n4": True}


def test_first_pod_exception_ignores_matching_pods_on_nodes_without_the_key() -> None:
    # A matching pod sits on a node without a zone label: it records no topology pair, so
    # the cluster still looks empty to the term and the self-affinity exception applies.
    table = builders.table_of([*nodes(), builders.node("n5", hostname=True)], [db("d", "n5")])
    pod = builders.pod("p", labels={"app": "db"}, pod_affinity=affinity(term(ZONE)))
    assert run_filter(pod, table) == {"n1": True, "n2": True, "n3": True, "n4": True, "n5": False}


def test_affinity_terms_are_anded_and_existing_pod_must_match_all() -> None:
    t_app = term(ZONE, selector(app="db"))
    t_tier = term(ZONE, selector(tier="backend"))
    table = builders.table_of(
        nodes(),
        [
            db("d", "n1"),  # matches only the first term
            builders.pod("b", node="n3", labels={"tier": "backend"}),  # only the second
        ],
    )
    pod = builders.pod("p", pod_affinity=affinity(t_app, t_tier))
    assert not any(run_filter(pod, table).values())
    table.add_pod("n4", builders.pod("both", labels={"app": "db", "tier": "backend"}))
    assert run_filter(pod, table) == {"n1": False, "n2": False, "n3": True, "n4": True}


def test_affinity_node_missing_topology_key_fails() -> None:
    table = builders.table_of(
        [*nodes(), builders.node("n5", hostname=True)], [db("d", "n5"), db("e", "n1")]
    )
    pod = builders.pod("p", pod_affinity=affinity(term(ZONE)))
    assert run_filter(pod, table) == {"n1": True, "n2": True, "n3": False, "n4": False, "n5": False}


# ---- namespaces ----------------------------------------------------------------------------
def test_affinity_looks_in_own_namespace_by_default() -> None:
    table = builders.table_of(nodes(), [db("d", "n1", namespace="other")])
    pod = builders.pod("p", pod_affinity=affinity(term(ZONE)))
    assert not any(run_filter(pod, table).values())


def test_affinity_namespaces_list() -> None:
    table = builders.table_of(nodes(), [db("d", "n1", namespace="other")])
    pod = builders.pod("p", pod_affinity=affinity(term(ZONE, namespaces=("other",))))
    assert run_filter(pod, table) == {"n1": True, "n2": True, "n3": False, "n4": False}


def test_affinity_empty_namespace_selector_means_all_namespaces() -> None:
    table = builders.table_of(nodes(), [db("d", "n3", namespace="other")])
    all_ns = models.LabelSelector()
    pod = builders.pod("p", pod_affinity=affinity(term(ZONE, namespace_selector=all_ns)))
    assert run_filter(pod, table) == {"n1": False, "n2": False, "n3": True, "n4": True}


def test_affinity_namespace_selector_matches_namespaces_by_their_labels() -> None:
    table = builders.table_of(nodes(), [db("d", "n3", namespace="team-a")])
    team = selector(team="a")
    pod = builders.pod("p", pod_affinity=affinity(term(ZONE, namespace_selector=team)))
    assert not any(run_filter(pod, table).values())  # namespace team-a is not in the view
    table.namespace_labels["team-a"] = {"team": "b"}
    assert not any(run_filter(pod, table).values())
    table.namespace_labels["team-a"] = {"team": "a"}
    assert run_filter(pod, table) == {"n1": False, "n2": False, "n3": True, "n4": True}


def test_namespaces_list_and_selector_are_a_union() -> None:
    """kube's PreFilter merges the namespaces the selector lists into the term's own list."""
    table = builders.table_of(
        nodes(), [db("d1", "n1", namespace="listed"), db("d2", "n3", namespace="team-a")]
    )
    table.namespace_labels.update({"listed": {}, "team-a": {"team": "a"}})
    t = term(HOSTNAME, namespaces=("listed",), namespace_selector=selector(team="a"))
    pod = builders.pod("p", pod_anti_affinity=affinity(t))
    assert run_filter(pod, table) == {"n1": False, "n2": True, "n3": False, "n4": True}


def test_existing_anti_affinity_namespace_selector_sees_the_incoming_pods_namespace() -> None:
    """An existing pod's term is matched against the incoming pod's namespace labels; an
    unknown namespace has none, so a DoesNotExist selector matches it (kube's
    GetNamespaceLabelsSnapshot gives an empty set)."""
    no_team = models.LabelSelector(
        match_expressions=(models.LabelSelectorRequirement("team", "DoesNotExist"),)
    )
    guard = builders.pod(
        "guard",
        node="n1",
        namespace="ops",
        pod_anti_affinity=affinity(term(ZONE, sel=selector(app="web"), namespace_selector=no_team)),
    )
    table = builders.table_of(nodes(), [guard])
    web = builders.pod("w", namespace="shop", labels={"app": "web"})
    assert run_filter(web, table) == {"n1": False, "n2": False, "n3": True, "n4": True}
    table.namespace_labels["shop"] = {"team": "a"}
    assert all(run_filter(web, table).values())
    table.namespace_labels["shop"] = {}
    assert reasons(web, table) == {
        "n1": REASON_EXISTING_ANTI_AFFINITY,
        "n2": REASON_EXISTING_ANTI_AFFINITY,
    }


# ---- required anti-affinity of the incoming pod --------------------------------------------
def test_anti_affinity_by_hostname() -> None:
    table = builders.table_of(nodes(), [db("d", "n1")])
    pod = builders.pod("p", pod_anti_affinity=affinity(term(HOSTNAME)))
    assert run_filter(pod, table) == {"n1": False, "n2": True, "n3": True, "n4": True}
    assert reasons(pod, table) == {"n1": REASON_ANTI_AFFINITY}


def test_anti_affinity_by_zone() -> None:
    table = builders.table_of(nodes(), [db("d", "n4")])
    pod = builders.pod("p", pod_anti_affinity=affinity(term(ZONE)))
    assert run_filter(pod, table) == {"n1": True, "n2": True, "n3": False, "n4": False}


def test_anti_affinity_node_without_key_passes() -> None:
    table = builders.table_of([*nodes(), builders.node("n5", hostname=True)], [db("d", "n5")])
    pod = builders.pod("p", pod_anti_affinity=affinity(term(ZONE)))
    assert all(run_filter(pod, table).values())


def test_anti_affinity_terms_each_apply() -> None:
    table = builders.table_of(
        nodes(), [db("d", "n1"), builders.pod("c", node="n3", labels={"app": "cache"})]
    )
    pod = builders.pod(
        "p",
        pod_anti_affinity=affinity(term(HOSTNAME), term(ZONE, selector(app="cache"))),
    )
    assert run_filter(pod, table) == {"n1": False, "n2": True, "n3": False, "n4": False}


def test_mismatch_label_keys_on_anti_affinity() -> None:
    # Anti-affinity to pods of the same app but a different tenant (exclusive topology).
    t = term(ZONE, selector(app="db"), mismatch_label_keys=("tenant",))
    pods = [builders.pod("x", node="n1", labels={"app": "db", "tenant": "a"})]
    table = builders.table_of(nodes(), pods)
    same = builders.pod("p", labels={"app": "db", "tenant": "a"}, pod_anti_affinity=affinity(t))
    other = builders.pod("q", labels={"app": "db", "tenant": "b"}, pod_anti_affinity=affinity(t))
    assert all(run_filter(same, table).values())
    assert run_filter(other, table) == {"n1": False, "n2": False, "n3": True, "n4": True}


# ---- existing pods' required anti-affinity (symmetry) ----------------------------------------
def test_existing_pod_anti_affinity_rejects_its_domain() -> None:
    guard = builders.pod(
        "g", node="n1", labels={"app": "guard"}, pod_anti_affinity=affinity(term(ZONE))
    )
    table = builders.table_of(nodes(), [guard])
    assert run_filter(builders.pod("p", labels={"app": "db"}), table) == {
        "n1": False,
        "n2": False,
        "n3": True,
        "n4": True,
    }
    assert reasons(builders.pod("p", labels={"app": "db"}), table) == {
        "n1": REASON_EXISTING_ANTI_AFFINITY,
        "n2": REASON_EXISTING_ANTI_AFFINITY,
    }
    assert all(run_filter(builders.pod("q", labels={"app": "web"}), table).values())
    # Other namespace: the guard's term looks in its own namespace only.
    assert all(run_filter(builders.pod("r", namespace="x", labels={"app": "db"}), table).values())


def test_existing_pod_anti_affinity_by_hostname_and_removal() -> None:
    guard = builders.pod("g", node="n3", pod_anti_affinity=affinity(term(HOSTNAME)))
    table = builders.table_of(nodes(), [guard])
    pod = builders.pod("p", labels={"app": "db"})
    assert run_filter(pod, table) == {"n1": True, "n2": True, "n3": False, "n4": True}
    table.remove_node("n3")
    assert all(run_filter(pod, table).values())
    assert not table.affinity_terms[REQUIRED_ANTI_AFFINITY]


# ---- scoring -------------------------------------------------------------------------------
def test_score_skip_without_any_terms() -> None:
    table = builders.table_of(nodes(), [db("d", "n1")])
    assert run_score(builders.pod("p"), table) is None


def test_score_preferred_affinity_favours_domain_with_matching_pods() -> None:
    table = builders.table_of(nodes(), [db("d1", "n1"), db("d2", "n2"), db("d3", "n3")])
    pod = builders.pod("p", pod_affinity=affinity(preferred=[(5, term(ZONE))]))
    # z1: 2 pods * 5 = 10, z2: 5. min 5 max 10: z1 100, z2 0.
    assert run_score(pod, table) == {"n1": 100, "n2": 100, "n3": 0, "n4": 0}


def test_score_preferred_terms_sum_over_keys() -> None:
    table = builders.table_of(nodes(), [db("d1", "n1"), db("d3", "n3")])
    pod = builders.pod(
        "p",
        pod_affinity=affinity(preferred=[(3, term(ZONE)), (4, term(HOSTNAME))]),
    )
    # n1: 3 + 4 = 7, n2: 3, n3: 7, n4: 3 -> (s-3)/4*100.
    assert run_score(pod, table) == {"n1": 100, "n2": 0, "n3": 100, "n4": 0}


def test_score_preferred_anti_affinity_penalises_domain() -> None:
    table = builders.table_of(nodes(), [db("d1", "n1"), db("d2", "n1"), db("d3", "n3")])
    pod = builders.pod(
        "p",
        pod_anti_affinity=affinity(preferred=[(2, term(HOSTNAME))]),
        pod_affinity=affinity(preferred=[(1, term(ZONE))]),
    )
    # hostname anti: n1 -4, n3 -2; zone affinity: z1 +2, z2 +1.
    # n1 -2, n2 2, n3 -1, n4 1. min -2 max 2: int(100*(s+2)/4) -> 0, 100, 25, 75.
    assert run_score(pod, table) == {"n1": 0, "n2": 100, "n3": 25, "n4": 75}


def test_score_existing_pods_preferred_terms_are_symmetric() -> None:
    lover = builders.pod(
        "l", node="n3", labels={"app": "x"}, pod_affinity=affinity(preferred=[(7, term(ZONE))])
    )
    hater = builders.pod(
        "h",
        node="n1",
        labels={"app": "y"},
        pod_anti_affinity=affinity(preferred=[(3, term(HOSTNAME))]),
    )
    table = builders.table_of(nodes(), [lover, hater])
    pod = builders.pod("p", labels={"app": "db"})
    # z2 +7, n1 -3: n1 -3, n2 0, n3 7, n4 7 -> int(100*(s+3)/10): 0, 30, 100, 100.
    assert run_score(pod, table) == {"n1": 0, "n2": 30, "n3": 100, "n4": 100}
    # A pod the terms do not select gets nothing to score.
    assert run_score(builders.pod("q", labels={"app": "web"}), table) is None


def test_score_namespace_selectors_of_both_sides() -> None:
    """The incoming pod's preferred term counts pods of the namespaces its selector lists;
    an existing pod's term is judged on the incoming pod's namespace labels."""
    prod = selector(env="prod")
    table = builders.table_of(
        nodes(),
        [
            db("d1", "n1", namespace="prod-a"),
            db("d2", "n3", namespace="dev-a"),
            builders.pod(
                "fan",
                node="n4",
                namespace="dev-a",
                labels={"app": "x"},
                pod_affinity=affinity(preferred=[(9, term(HOSTNAME, namespace_selector=prod))]),
            ),
        ],
    )
    table.namespace_labels.update({"prod-a": {"env": "prod"}, "dev-a": {"env": "dev"}})
    pod = builders.pod(
        "p",
        namespace="dev-a",
        labels={"app": "db"},
        pod_affinity=affinity(preferred=[(5, term(ZONE, namespace_selector=prod))]),
    )
    # Only d1 (prod-a) counts: z1 +5. The fan's term wants prod namespaces: p is in dev-a.
    assert run_score(pod, table) == {"n1": 100, "n2": 100, "n3": 0, "n4": 0}
    table.namespace_labels["dev-a"] = {"env": "prod"}
    # Now d2 counts too (z2 +5) and the fan's term selects p (n4 +9).
    assert run_score(pod, table) == {"n1": 0, "n2": 0, "n3": 0, "n4": 100}


def test_score_hard_pod_affinity_weight() -> None:
    needy = builders.pod("n", node="n4", labels={"app": "x"}, pod_affinity=affinity(term(ZONE)))
    table = builders.table_of(nodes(), [needy])
    pod = builders.pod("p", labels={"app": "db"})
    assert run_score(pod, table) == {"n1": 0, "n2": 0, "n3": 100, "n4": 100}
    assert run_score(pod, table, {"hardPodAffinityWeight": 0}) is None


def test_score_ignore_preferred_terms_of_existing_pods() -> None:
    lover = builders.pod("l", node="n3", pod_affinity=affinity(preferred=[(7, term(ZONE))]))
    table = builders.table_of(nodes(), [lover])
    pod = builders.pod("p", labels={"app": "db"})
    assert run_score(pod, table) is not None
    assert run_score(pod, table, {"ignorePreferredTermsOfExistingPods": True}) is None


def test_score_terms_touching_only_unlabelled_nodes_skip() -> None:
    table = builders.table_of(
        [builders.node("n1", hostname=True), builders.node("n2", hostname=True)], [db("d", "n1")]
    )
    pod = builders.pod("p", pod_affinity=affinity(preferred=[(5, term(ZONE))]))
    assert run_score(pod, table) is None


def test_args_validation() -> None:
    with pytest.raises(ValueError, match="hardPodAffinityWeight"):
        InterPodAffinity({"hardPodAffinityWeight": 101})
    with pytest.raises(ValueError, match="ignorePreferred"):
        InterPodAffinity({"ignorePreferredTermsOfExistingPods": "yes"})


# ---- property: vectorised Filter == a plain per-node reading of kube-scheduler --------------
def _ref_term_matches(
    t: models.PodAffinityTerm,
    owner_ns: str,
    target: models.Pod,
    ns_labels: Mapping[str, Mapping[str, str]],
    *,
    incoming: bool,
) -> bool:
    """AffinityTerm.Matches: the incoming pod's term after PreFilter merged the namespaces
    its selector lists (existing namespaces only), or an existing pod's term with the
    incoming pod's namespace labels (empty when unknown)."""
    if t.label_selector is None:
        return False
    sel = t.namespace_selector
    everything = sel is not None and not sel.match_labels and not sel.match_expressions
    if not t.namespaces and sel is None:
        namespaces_ok = target.namespace == owner_ns
    elif everything or target.namespace in t.namespaces:
        namespaces_ok = True
    elif sel is None:
        namespaces_ok = False
    elif incoming:
        namespaces_ok = target.namespace in ns_labels and sel.matches(ns_labels[target.namespace])
    else:
        namespaces_ok = sel.matches(ns_labels.get(target.namespace, {}))
    return namespaces_ok and t.label_selector.matches(target.labels)


def reference_affinity_filter(
    pod: models.Pod,
    nodes: Sequence[models.Node],
    pods: Sequence[models.Pod],
    ns_labels: Mapping[str, Mapping[str, str]],
) -> dict[str, bool]:
    """PreFilter's three topology-pair maps and Filter's three checks from
    interpodaffinity/filtering.go, node by node."""

    def matches(
        t: models.PodAffinityTerm, owner_ns: str, target: models.Pod, *, incoming: bool = True
    ) -> bool:
        return _ref_term_matches(t, owner_ns, target, ns_labels, incoming=incoming)

    by_name = {n.name: n for n in nodes}
    req = pod.pod_affinity.required if pod.pod_affinity else ()
    anti = pod.pod_anti_affinity.required if pod.pod_anti_affinity else ()
    affinity_counts: dict[tuple[str, str], int] = {}
    anti_counts: dict[tuple[str, str], int] = {}
    existing_counts: dict[tuple[str, str], int] = {}
    for p in pods:
        node = by_name[p.node_name]
        if req and all(matches(t, pod.namespace, p) for t in req):
            for t in req:
                if t.topology_key in node.labels:
                    pair = (t.topology_key, node.labels[t.topology_key])
                    affinity_counts[pair] = affinity_counts.get(pair, 0) + 1
        for t in anti:
            if matches(t, pod.namespace, p) and t.topology_key in node.labels:
                pair = (t.topology_key, node.labels[t.topology_key])
                anti_counts[pair] = anti_counts.get(pair, 0) + 1
        for t in p.pod_anti_affinity.required if p.pod_anti_affinity else ():
            if matches(t, p.namespace, pod, incoming=False) and t.topology_key in node.labels:
                pair = (t.topology_key, node.labels[t.topology_key])
                existing_counts[pair] = existing_counts.get(pair, 0) + 1
    out: dict[str, bool] = {}
    for node in nodes:
        ok = True
        pods_exist = True
        for t in req:
            if t.topology_key not in node.labels:
                ok = False
                break
            if affinity_counts.get((t.topology_key, node.labels[t.topology_key]), 0) <= 0:
                pods_exist = False
        if ok and not pods_exist:
            ok = not affinity_counts and all(matches(t, pod.namespace, pod) for t in req)
        for t in anti:
            value = node.labels.get(t.topology_key)
            if value is not None and anti_counts.get((t.topology_key, value), 0) > 0:
                ok = False
        if any(existing_counts.get((k, v), 0) > 0 for k, v in node.labels.items()):
            ok = False
        out[node.name] = ok
    return out


@st.composite
def affinity_pods(draw: Any) -> models.Pod:
    required = tuple(random_term(draw) for _ in range(draw(st.integers(0, 2))))
    anti = tuple(random_term(draw) for _ in range(draw(st.integers(0, 2))))
    return builders.pod(
        "incoming",
        namespace=draw(st.sampled_from(("default", "other"))),
        labels=random_labels(draw),
        pod_affinity=models.PodAffinity(required=required) if required else None,
        pod_anti_affinity=models.PodAffinity(required=anti) if anti else None,
    )


@settings(max_examples=300, deadline=None)
@given(cluster=clusters(), pod=affinity_pods(), data=st.data())
def test_filter_matches_plain_reference(
    cluster: tuple[list[models.Node], list[models.Pod]], pod: models.Pod, data: st.DataObject
) -> None:
    nodes, pods = cluster
    table = builders.table_of(nodes, pods)
    table.namespace_labels.update(data.draw(st.composite(random_namespace_labels)()))
    add_remove_churn(table, pods)
    expected = reference_affinity_filter(pod, nodes, pods, table.namespace_labels)
    assert run_filter(pod, table) == expected
