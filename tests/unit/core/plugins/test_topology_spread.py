"""PodTopologySpread: Filter and Score against kube-scheduler's semantics (cases modelled on
podtopologyspread/filtering_test.go and scoring_test.go, expectations derived by hand)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core import framework, models
from splitsched.core.nodetable import NodeTable
from splitsched.core.plugins.topology_spread import (
    REASON_CONSTRAINTS,
    REASON_MISSING_LABEL,
    PodTopologySpread,
)
from tests.support import builders
from tests.support.builders import (
    HOSTNAME,
    SELECTORS,
    ZONE,
    add_remove_churn,
    clusters,
    exists,
    random_labels,
)


def tsc(
    key: str,
    max_skew: int = 1,
    *,
    hard: bool = True,
    sel: models.LabelSelector | None = None,
    **kw: Any,
) -> models.TopologySpreadConstraint:
    return models.TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable="DoNotSchedule" if hard else "ScheduleAnyway",
        label_selector=exists("foo") if sel is None else sel,
        **kw,
    )


def incoming(*constraints: models.TopologySpreadConstraint, **kw: Any) -> models.Pod:
    labels = kw.pop("labels", {"foo": ""})
    return builders.pod("p", labels=labels, topology_spread_constraints=constraints, **kw)


def four_nodes() -> list[models.Node]:
    return [
        builders.node("node-a", hostname=True, zone="zone1"),
        builders.node("node-b", hostname=True, zone="zone1"),
        builders.node("node-x", hostname=True, zone="zone2"),
        builders.node("node-y", hostname=True, zone="zone2"),
    ]


def foo_pods(spread: Mapping[str, int], *, namespace: str = "default") -> list[models.Pod]:
    return [
        builders.pod(f"{node}-{i}", node=node, namespace=namespace, labels={"foo": ""})
        for node, count in spread.items()
        for i in range(count)
    ]


def run_filter(
    pod: models.Pod, table: NodeTable, args: Mapping[str, Any] | None = None
) -> dict[str, bool]:
    plugin = PodTopologySpread(args)
    state = framework.CycleState()
    status = plugin.pre_filter(state, pod, table)
    mask = plugin.filter(state, pod, table)
    if status.code is framework.Code.SKIP:
        assert mask.all()
    return {name: bool(mask[row]) for name, row in table.row_of.items()}


def reasons(pod: models.Pod, table: NodeTable) -> dict[str, str]:
    plugin = PodTopologySpread()
    state = framework.CycleState()
    plugin.pre_filter(state, pod, table)
    mask = plugin.filter(state, pod, table)
    rows = [int(r) for r in np.flatnonzero(~mask)]
    got = plugin.failure_reasons(state, pod, table, rows)
    return {table.names[r]: rs[0] for r, rs in zip(rows, got, strict=True)}


def run_score(
    pod: models.Pod,
    table: NodeTable,
    candidates: Sequence[str] | None = None,
    args: Mapping[str, Any] | None = None,
) -> dict[str, float] | None:
    plugin = PodTopologySpread(args)
    state = framework.CycleState()
    names = list(candidates) if candidates is not None else list(table.names)
    rows = np.asarray([table.row_of[n] for n in names], dtype=np.int64)
    if plugin.pre_score(state, pod, table, rows).code is framework.Code.SKIP:
        return None
    raw = plugin.score(state, pod, table, rows)
    final = plugin.normalize(state, pod, raw)
    return {n: float(s) for n, s in zip(names, final, strict=True)}


# ---- Filter --------------------------------------------------------------------------------
def test_no_constraints_skips_prefilter_and_passes_every_node() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 3}))
    plugin = PodTopologySpread()
    state = framework.CycleState()
    pod = builders.pod("p", labels={"foo": ""})
    assert plugin.pre_filter(state, pod, table).code is framework.Code.SKIP
    assert plugin.filter(state, pod, table).all()


def test_schedule_anyway_only_skips_filter() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 3}))
    pod = incoming(tsc(ZONE, hard=False))
    assert PodTopologySpread().pre_filter(framework.CycleState(), pod, table).code is (
        framework.Code.SKIP
    )


def test_no_existing_pods_every_node_fits() -> None:
    table = builders.table_of(four_nodes())
    assert all(run_filter(incoming(tsc(ZONE)), table).values())


def test_pods_in_other_namespace_do_not_count() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 3}, namespace="other"))
    assert all(run_filter(incoming(tsc(HOSTNAME)), table).values())


def test_terminating_pods_do_not_count() -> None:
    pods = [
        builders.pod(f"t{i}", node="node-a", labels={"foo": ""}, deleting=True) for i in range(3)
    ]
    table = builders.table_of(four_nodes(), pods)
    assert all(run_filter(incoming(tsc(HOSTNAME)), table).values())


def test_zones_three_three_all_fit() -> None:
    table = builders.table_of(
        four_nodes(), foo_pods({"node-a": 1, "node-b": 2, "node-x": 2, "node-y": 1})
    )
    # 3 vs 3: adding one anywhere gives skew 1.
    assert all(run_filter(incoming(tsc(ZONE)), table).values())


def test_zones_unbalanced_only_emptier_zone_fits() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 2, "node-b": 1, "node-x": 1}))
    # zone1 = 3, zone2 = 1, min 1: zone1 -> 3+1-1 = 3 > 1; zone2 -> 1+1-1 = 1.
    assert run_filter(incoming(tsc(ZONE)), table) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": True,
    }


def test_hostname_spread_2_1_0_3_only_empty_node_fits() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 2, "node-b": 1, "node-y": 3}))
    assert run_filter(incoming(tsc(HOSTNAME)), table) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": False,
    }


def test_hostname_spread_2_1_0_3_max_skew_2() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 2, "node-b": 1, "node-y": 3}))
    # skew = count + 1 - 0 <= 2 for node-b (2) and node-x (1).
    assert run_filter(incoming(tsc(HOSTNAME, 2)), table) == {
        "node-a": False,
        "node-b": True,
        "node-x": True,
        "node-y": False,
    }


def test_incoming_pod_not_matching_itself_has_no_self_count() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 2, "node-b": 1, "node-y": 3}))
    pod = incoming(tsc(HOSTNAME), labels={"bar": ""})
    # skew = count - 0 <= 1: node-b (1) and node-x (0).
    assert run_filter(pod, table) == {
        "node-a": False,
        "node-b": True,
        "node-x": True,
        "node-y": False,
    }


def test_node_missing_topology_key_is_rejected_with_missing_label_reason() -> None:
    nodes = [
        builders.node("node-a", hostname=True, zone="zone1"),
        builders.node("node-b", hostname=True),
        builders.node("node-x", hostname=True, zone="zone2"),
    ]
    # node-b's pods count for no zone: zone1 = 1, zone2 = 2 (its 5 pods are invisible).
    table = builders.table_of(nodes, foo_pods({"node-a": 1, "node-b": 5, "node-x": 2}))
    pod = incoming(tsc(ZONE))
    assert run_filter(pod, table) == {"node-a": True, "node-b": False, "node-x": False}
    assert reasons(pod, table) == {
        "node-b": REASON_MISSING_LABEL,
        "node-x": REASON_CONSTRAINTS,
    }


def test_every_node_missing_the_key_rejects_all() -> None:
    table = builders.table_of(four_nodes())
    assert not any(run_filter(incoming(tsc("rack")), table).values())


def test_two_constraints_zone_and_hostname() -> None:
    table = builders.table_of(
        four_nodes(), foo_pods({"node-a": 3, "node-b": 0, "node-x": 1, "node-y": 2})
    )
    # zone1 = 3, zone2 = 3: zone constraint passes everywhere.
    # hostname min 0 (node-b): only node-b (0+1) and node-x (1+1-0 = 2 > 1, no) pass.
    pod = incoming(tsc(ZONE), tsc(HOSTNAME))
    assert run_filter(pod, table) == {
        "node-a": False,
        "node-b": True,
        "node-x": False,
        "node-y": False,
    }


def test_nodes_missing_one_key_are_left_out_of_every_constraints_counts() -> None:
    nodes = [
        *four_nodes(),
        builders.node("node-z", hostname=False, labels={"other": "1"}, zone="zone3"),
    ]
    table = builders.table_of(nodes, foo_pods({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}))
    # node-z lacks the hostname key, so zone3 is not an eligible domain: min stays 2.
    pod = incoming(tsc(ZONE), tsc(HOSTNAME, 3))
    got = run_filter(pod, table)
    assert got == {"node-a": True, "node-b": True, "node-x": True, "node-y": True, "node-z": False}


def test_min_domains_larger_than_domain_count_treats_global_min_as_zero() -> None:
    table = builders.table_of(
        four_nodes(), foo_pods({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1})
    )
    # zones 2/2. Without minDomains: skew 2+1-2 = 1 fits. With minDomains 3: min = 0,
    # skew 3 > maxSkew 2, so nothing fits.
    assert all(run_filter(incoming(tsc(ZONE)), table).values())
    pod = incoming(tsc(ZONE, 2, min_domains=3))
    assert not any(run_filter(pod, table).values())
    # minDomains equal to the number of domains changes nothing.
    assert all(run_filter(incoming(tsc(ZONE, 1, min_domains=2)), table).values())


def test_min_domains_with_hostname() -> None:
    table = builders.table_of(
        four_nodes(), foo_pods({"node-a": 2, "node-b": 2, "node-x": 1, "node-y": 1})
    )
    # 4 domains, minDomains 5: min 0, maxSkew 2 -> count + 1 <= 2 -> count <= 1.
    pod = incoming(tsc(HOSTNAME, 2, min_domains=5))
    assert run_filter(pod, table) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": True,
    }


def test_match_label_keys_narrow_the_counted_pods() -> None:
    pods = [
        *[builders.pod(f"v1-{i}", node="node-a", labels={"foo": "", "rev": "1"}) for i in range(3)],
        builders.pod("v2-0", node="node-x", labels={"foo": "", "rev": "2"}),
    ]
    table = builders.table_of(four_nodes(), pods)
    plain = incoming(tsc(HOSTNAME), labels={"foo": "", "rev": "2"})
    keyed = incoming(tsc(HOSTNAME, match_label_keys=("rev",)), labels={"foo": "", "rev": "2"})
    # All four pods count: min 0 (node-b, node-y), node-a 3+1 > 1, node-x 1+1 > 1.
    assert run_filter(plain, table) == {
        "node-a": False,
        "node-b": True,
        "node-x": False,
        "node-y": True,
    }
    # Only rev=2 counts: node-a now looks empty.
    assert run_filter(keyed, table) == {
        "node-a": True,
        "node-b": True,
        "node-x": False,
        "node-y": True,
    }


def test_node_affinity_policy_honor_excludes_unmatched_nodes_from_counts() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 2, "node-b": 1, "node-y": 3}))
    affinity = models.NodeAffinity(
        required=(
            models.NodeSelectorTerm(
                match_expressions=(
                    models.NodeSelectorRequirement(HOSTNAME, "NotIn", ("node-b", "node-x")),
                )
            ),
        )
    )
    honor = incoming(tsc(HOSTNAME), node_affinity=affinity)
    # Eligible domains node-a (2) and node-y (3): min 2. node-a 2+1-2 = 1 fits, node-y 2
    # does not; node-b/x (not eligible) have 1+1-2 = 0 and 0+1-2 < 0 (NodeAffinity rejects
    # them, not this plugin).
    assert run_filter(honor, table) == {
        "node-a": True,
        "node-b": True,
        "node-x": True,
        "node-y": False,
    }
    ignore = incoming(tsc(HOSTNAME, node_affinity_policy="Ignore"), node_affinity=affinity)
    assert run_filter(ignore, table) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": False,
    }


def test_node_selector_counts_for_node_affinity_policy() -> None:
    nodes = [
        builders.node("node-a", hostname=True, zone="zone1", labels={"disk": "ssd"}),
        builders.node("node-b", hostname=True, zone="zone2", labels={"disk": "ssd"}),
        builders.node("node-x", hostname=True, zone="zone3"),
    ]
    table = builders.table_of(nodes, foo_pods({"node-a": 1, "node-b": 1}))
    # Honor: zone3 (no ssd) is not a domain, min 1 -> every node fits (1+1-1, 0+1-1).
    pod = incoming(tsc(ZONE), node_selector={"disk": "ssd"})
    assert all(run_filter(pod, table).values())
    # Ignore: zone3 counts with 0 -> zones 1 and 2 are at 1+1-0 = 2 > 1.
    pod = incoming(tsc(ZONE, node_affinity_policy="Ignore"), node_selector={"disk": "ssd"})
    assert run_filter(pod, table) == {"node-a": False, "node-b": False, "node-x": True}


def test_node_taints_policy() -> None:
    taint = models.Taint("dedicated", "x", "NoSchedule")
    nodes = [
        builders.node("node-a", hostname=True, zone="zone1"),
        builders.node("node-b", hostname=True, zone="zone2"),
        builders.node("node-c", hostname=True, zone="zone3", taints=[taint]),
    ]
    table = builders.table_of(nodes, foo_pods({"node-a": 1, "node-b": 1}))
    # Ignore (default): zone3 (empty, tainted) is a domain -> min 0, zones 1/2 fail.
    assert run_filter(incoming(tsc(ZONE)), table) == {
        "node-a": False,
        "node-b": False,
        "node-c": True,
    }
    # Honor: the untolerated zone3 is left out -> min 1 -> everyone passes this plugin.
    assert all(run_filter(incoming(tsc(ZONE, node_taints_policy="Honor")), table).values())
    # Honor, but the pod tolerates the taint: zone3 counts again.
    tolerant = incoming(
        tsc(ZONE, node_taints_policy="Honor"),
        tolerations=(models.Toleration(key="dedicated", operator="Exists"),),
    )
    assert run_filter(tolerant, table)["node-a"] is False


def test_prefer_no_schedule_taints_do_not_exclude_under_honor() -> None:
    soft = models.Taint("soft", "", "PreferNoSchedule")
    nodes = [
        builders.node("node-a", hostname=True, zone="z1"),
        builders.node("node-b", hostname=True, zone="z2", taints=[soft]),
    ]
    table = builders.table_of(nodes, foo_pods({"node-a": 1}))
    got = run_filter(incoming(tsc(ZONE, node_taints_policy="Honor")), table)
    assert got == {"node-a": False, "node-b": True}


def test_an_empty_selector_counts_no_pod_but_matches_the_incoming_one() -> None:
    """kube's countPodsMatchSelector returns 0 for an empty selector, while Filter's
    self-match (Selector.Matches) is 1: every node fits maxSkew 1 however pods lie."""
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 3, "node-x": 1}))
    pod = incoming(tsc(HOSTNAME, sel=models.LabelSelector()))
    assert all(run_filter(pod, table).values())
    # With matchLabelKeys merged in it is no longer empty: it counts pods of the same key.
    keyed = incoming(tsc(HOSTNAME, sel=models.LabelSelector(), match_label_keys=("foo",)))
    assert run_filter(keyed, table) == {
        "node-a": False,
        "node-b": True,
        "node-x": False,
        "node-y": True,
    }
    soft = incoming(tsc(HOSTNAME, hard=False, sel=models.LabelSelector()))
    assert run_score(soft, table) == dict.fromkeys(table.names, 100.0)


def test_a_null_selector_takes_no_match_label_keys_and_matches_nothing() -> None:
    """labels.Nothing() stays Nothing when kube merges matchLabelKeys (the API refuses the
    combination; Simulate input may still carry it)."""
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 3}))
    null = models.TopologySpreadConstraint(
        max_skew=1,
        topology_key=HOSTNAME,
        when_unsatisfiable="DoNotSchedule",
        label_selector=None,
        match_label_keys=("foo",),
    )
    pod = incoming(null)
    # Nothing counted, no self-match: 0 + 0 - 0 <= 1 everywhere.
    assert all(run_filter(pod, table).values())


def test_score_node_taints_policy_decides_whose_pods_count_in_a_domain() -> None:
    """Scoring counts, per domain of the candidates, the pods on every node the policies
    admit: Honor leaves out the untolerated tainted node's pods (kube's PreScore)."""
    taint = models.Taint("dedicated", "x", "NoSchedule")
    nodes = [
        builders.node("a", hostname=True, zone="z1"),
        builders.node("b", hostname=True, zone="z2"),
        builders.node("c", hostname=True, zone="z1", taints=[taint]),
    ]
    table = builders.table_of(nodes, foo_pods({"c": 2, "b": 1}))
    # Ignore: z1 = 2, z2 = 1; weight ln(2 + 2): a round(2.77) = 3, b round(1.39) = 1.
    ignore = incoming(tsc(ZONE, hard=False))
    assert run_score(ignore, table, ["a", "b"]) == {"a": 33.0, "b": 100.0}
    # Honor: c's pods are out, z1 = 0: a 0, b 1.
    honor = incoming(tsc(ZONE, hard=False, node_taints_policy="Honor"))
    assert run_score(honor, table, ["a", "b"]) == {"a": 100.0, "b": 0.0}


def test_score_node_affinity_policy_decides_whose_pods_count_in_a_domain() -> None:
    nodes = [
        builders.node("a", hostname=True, zone="z1", labels={"disk": "ssd"}),
        builders.node("b", hostname=True, zone="z2", labels={"disk": "ssd"}),
        builders.node("c", hostname=True, zone="z1"),
    ]
    table = builders.table_of(nodes, foo_pods({"c": 2, "b": 1}))
    # Honor (the default): c fails the nodeSelector, its pods are out of z1.
    honor = incoming(tsc(ZONE, hard=False), node_selector={"disk": "ssd"})
    assert run_score(honor, table, ["a", "b"]) == {"a": 100.0, "b": 0.0}
    ignore = incoming(
        tsc(ZONE, hard=False, node_affinity_policy="Ignore"), node_selector={"disk": "ssd"}
    )
    assert run_score(ignore, table, ["a", "b"]) == {"a": 33.0, "b": 100.0}


def test_filter_without_prefilter_state_computes_it() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 2, "node-b": 1, "node-y": 3}))
    mask = PodTopologySpread().filter(framework.CycleState(), incoming(tsc(HOSTNAME)), table)
    assert mask.tolist() == [False, False, True, False]


def test_index_follows_pod_removal_and_node_removal() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 2, "node-y": 1}))
    pod = incoming(tsc(HOSTNAME))
    assert run_filter(pod, table)["node-a"] is False
    table.remove_pod("node-a", "uid-default-node-a-0")
    table.remove_pod("node-a", "uid-default-node-a-1")
    assert run_filter(pod, table)["node-a"] is True
    table.remove_node("node-b")
    table.remove_node("node-x")
    # Left: node-a (0), node-y (1): min 0 -> node-y 2 > 1.
    assert run_filter(pod, table) == {"node-a": True, "node-y": False}
    assert not table.pod_groups or all(
        set(g.on_node) <= set(table.names) for g in table.pod_groups.values()
    )


def test_default_constraints_list_with_do_not_schedule() -> None:
    owner = models.OwnerRef(kind="ReplicaSet", name="rs", uid="rs-1", controller=True)
    pods = [builders.pod(f"r{i}", node="node-a", owner=owner) for i in range(2)]
    table = builders.table_of(four_nodes(), pods)
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "DoNotSchedule"}
        ],
    }
    pod = builders.pod("p", owner=owner)
    assert run_filter(pod, table, args) == {
        "node-a": False,
        "node-b": True,
        "node-x": True,
        "node-y": True,
    }
    # No owner: no selector can be derived, so no default constraints.
    assert all(run_filter(builders.pod("q"), table, args).values())


def test_args_validation() -> None:
    import pytest

    with pytest.raises(ValueError, match="defaultConstraints"):
        PodTopologySpread(
            {
                "defaultingType": "System",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}
                ],
            }
        )
    with pytest.raises(ValueError, match="maxSkew"):
        PodTopologySpread(
            {
                "defaultingType": "List",
                "defaultConstraints": [{"maxSkew": 0, "topologyKey": ZONE}],
            }
        )
    with pytest.raises(ValueError, match="defaultingType"):
        PodTopologySpread({"defaultingType": "Sometimes"})


# ---- Score ---------------------------------------------------------------------------------
def test_score_hostname_constraint_all_candidates() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 2, "node-b": 1, "node-y": 3}))
    pod = incoming(tsc(HOSTNAME, hard=False))
    # weight ln(4+2) = 1.792; raw round(count*w): a 4, b 2, x 0, y 5.
    # normalised 100*(5+0-s)/5: a 20, b 60, x 100, y 0.
    assert run_score(pod, table) == {"node-a": 20, "node-b": 60, "node-x": 100, "node-y": 0}


def test_score_zone_constraint_counts_pods_on_non_candidate_nodes() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 1, "node-b": 2, "node-x": 1}))
    pod = incoming(tsc(ZONE, hard=False))
    # Candidates node-a and node-x only: zone1 = 3 (node-b counts), zone2 = 1.
    # 2 zones: w = ln 4 = 1.386; raw a round(4.159) = 4, x round(1.386) = 1.
    # 100*(4+1-s)/4: a 25, x 100.
    assert run_score(pod, table, ["node-a", "node-x"]) == {"node-a": 25, "node-x": 100}


def test_score_max_skew_softens_differences() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 1}))
    pod = incoming(tsc(HOSTNAME, 3, hard=False))
    # w = ln 6; raw: a round(1.79 + 2) = 4, others 2. 100*(4+2-s)/4: a 50, others 100.
    assert run_score(pod, table) == {"node-a": 50, "node-b": 100, "node-x": 100, "node-y": 100}


def test_score_all_zero_gives_max_to_everyone() -> None:
    table = builders.table_of(four_nodes())
    pod = incoming(tsc(HOSTNAME, hard=False))
    assert run_score(pod, table) == {n: 100 for n in ("node-a", "node-b", "node-x", "node-y")}


def test_score_nodes_missing_a_key_get_zero() -> None:
    nodes = [*four_nodes(), builders.node("node-z", hostname=True)]
    table = builders.table_of(nodes, foo_pods({"node-a": 2, "node-b": 1, "node-y": 3}))
    pod = incoming(tsc(ZONE, hard=False), tsc(HOSTNAME, hard=False))
    got = run_score(pod, table)
    assert got is not None
    assert got["node-z"] == 0
    # zone1 = 3, zone2 = 3; 2 zones (w ln4), 4 hostnames (w ln6).
    # raw: a 3*1.386+2*1.792 = 7.74 -> 8; b 4.159+1.792 = 5.95 -> 6; x 4.159 -> 4;
    # y 4.159+5.375 = 9.53 -> 10. min 4 max 10: 100*(14-s)/10 -> a 60, b 80, x 100, y 40.
    assert got == {"node-a": 60, "node-b": 80, "node-x": 100, "node-y": 40, "node-z": 0}


def test_score_ordering_prefers_emptier_domains() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 5, "node-b": 5, "node-x": 1}))
    got = run_score(incoming(tsc(ZONE, hard=False)), table)
    assert got is not None
    assert got["node-x"] == got["node-y"] > got["node-a"] == got["node-b"]


def test_score_skip_without_soft_constraints() -> None:
    table = builders.table_of(four_nodes(), foo_pods({"node-a": 1}))
    assert run_score(incoming(tsc(ZONE)), table) is None
    assert run_score(builders.pod("bare"), table) is None


def test_system_defaults_spread_pods_of_the_same_replicaset() -> None:
    owner = models.OwnerRef(kind="ReplicaSet", name="rs", uid="rs-1", controller=True)
    other = models.OwnerRef(kind="ReplicaSet", name="rs2", uid="rs-2", controller=True)
    pods = [
        builders.pod("r0", node="node-a", owner=owner),
        builders.pod("r1", node="node-a", owner=owner),
        builders.pod("o0", node="node-x", owner=other),
        builders.pod("o1", node="node-x", owner=other),
    ]
    table = builders.table_of(four_nodes(), pods)
    got = run_score(builders.pod("p", owner=owner), table)
    assert got is not None
    # hostname (maxSkew 3, w ln6): a 2*1.79+2 = 5.58 -> 6, others 2;
    # zone (maxSkew 5, w ln4): zone1 2*1.386+4 = 6.77, zone2 4.
    # a 5.58+6.77 = 12.36 -> 12; b 2+6.77 = 8.77 -> 9; x, y 2+4 = 6.
    # 100*(12+6-s)/12: a 50, b 75, x 100, y 100.
    assert got == {"node-a": 50, "node-b": 75, "node-x": 100, "node-y": 100}
    # A pod with no owner gets no system defaults.
    assert run_score(builders.pod("q"), table) is None


def test_system_defaults_do_not_require_the_zone_label() -> None:
    owner = models.OwnerRef(kind="StatefulSet", name="ss", uid="ss-1", controller=True)
    nodes = [builders.node("n1", hostname=True), builders.node("n2", hostname=True)]
    table = builders.table_of(nodes, [builders.pod("s0", node="n1", owner=owner)])
    got = run_score(builders.pod("p", owner=owner), table)
    # No zone labels: hostname spreading still applies (n1 has one pod, n2 none).
    assert got is not None
    assert got["n2"] == 100 and got["n1"] < 100


# ---- property: vectorised Filter == a plain per-node reading of kube-scheduler --------------
def _ref_selector(c: models.TopologySpreadConstraint, pod: models.Pod) -> tuple[Any, Any]:
    """(counts, matches): which existing pods countPodsMatchSelector counts, and the
    selector's Matches (the incoming pod's self-match). A nil labelSelector is
    labels.Nothing() and takes no matchLabelKeys; an empty one, after the merge, is
    labels.Everything(), which matches every pod but counts none (selector.Empty())."""
    sel = c.label_selector
    keys = {k: pod.labels[k] for k in c.match_label_keys if k in pod.labels}

    def matches(labels: Mapping[str, str]) -> bool:
        if sel is None:
            return False
        return all(labels.get(k) == v for k, v in keys.items()) and sel.matches(labels)

    empty = sel is not None and not sel.match_labels and not sel.match_expressions and not keys

    def counts(labels: Mapping[str, str]) -> bool:
        return not empty and matches(labels)

    return counts, matches


def _ref_node_affinity(pod: models.Pod, node: models.Node) -> bool:
    """GetRequiredNodeAffinity(pod).Match for the nodeSelector and single-requirement In /
    NotIn terms spread_pods draws."""
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    aff = pod.node_affinity
    if aff is None or aff.required is None:
        return True
    for term in aff.required:
        (req,) = term.match_expressions
        has = node.labels.get(req.key) in req.values
        if has == (req.operator == "In"):
            return True
    return False


def reference_spread_filter(
    pod: models.Pod, nodes: Sequence[models.Node], pods: Sequence[models.Pod]
) -> dict[str, bool]:
    """calPreFilterState + Filter from podtopologyspread/filtering.go, node by node."""
    hard = [c for c in pod.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
    resolved = [_ref_selector(c, pod) for c in hard]
    counters = [counts for counts, _ in resolved]
    matchers = [matches for _, matches in resolved]
    domain_counts: list[dict[str, int]] = [{} for _ in hard]
    for node in nodes:
        if any(c.topology_key not in node.labels for c in hard):
            continue
        for i, c in enumerate(hard):
            if c.node_affinity_policy == "Honor" and not _ref_node_affinity(pod, node):
                continue
            if c.node_taints_policy == "Honor" and any(
                t.effect in ("NoSchedule", "NoExecute")
                and not any(tol.tolerates(t) for tol in pod.tolerations)
                for t in node.taints
            ):
                continue
            value = node.labels[c.topology_key]
            here = sum(
                1
                for p in pods
                if p.node_name == node.name
                and p.namespace == pod.namespace
                and not p.deleting
                and counters[i](p.labels)
            )
            domain_counts[i][value] = domain_counts[i].get(value, 0) + here
    out: dict[str, bool] = {}
    for node in nodes:
        ok = True
        for i, c in enumerate(hard):
            if c.topology_key not in node.labels:
                ok = False
                break
            counts = domain_counts[i]
            min_domains = c.min_domains or 1
            global_min = min(counts.values()) if len(counts) >= min_domains else 0
            self_match = 1 if matchers[i](pod.labels) else 0
            if counts.get(node.labels[c.topology_key], 0) + self_match - global_min > c.max_skew:
                ok = False
                break
        out[node.name] = ok
    return out


@st.composite
def spread_pods(draw: Any) -> models.Pod:
    constraints = []
    for _ in range(draw(st.integers(1, 2))):
        constraints.append(
            models.TopologySpreadConstraint(
                max_skew=draw(st.integers(1, 3)),
                topology_key=draw(st.sampled_from((ZONE, HOSTNAME, ZONE, "rack"))),
                when_unsatisfiable=draw(
                    st.sampled_from(("DoNotSchedule",) * 3 + ("ScheduleAnyway",))
                ),
                label_selector=draw(st.sampled_from(SELECTORS)),
                min_domains=draw(st.sampled_from((None, 1, 2, 4))),
                node_affinity_policy=draw(st.sampled_from(("Honor", "Ignore"))),
                node_taints_policy=draw(st.sampled_from(("Honor", "Ignore"))),
                match_label_keys=draw(st.sampled_from(((), ("rev",)))),
            )
        )
    op = draw(st.sampled_from((None, "In", "NotIn")))
    required = (
        None
        if op is None
        else (
            models.NodeSelectorTerm(
                match_expressions=(models.NodeSelectorRequirement("disk", op, ("ssd",)),)
            ),
        )
    )
    return builders.pod(
        "incoming",
        labels=random_labels(draw),
        node_affinity=None if required is None else models.NodeAffinity(required=required),
        node_selector={"disk": "ssd"} if draw(st.booleans()) else {},
        tolerations=(models.Toleration(key="dedicated", operator="Exists"),)
        if draw(st.booleans())
        else (),
        topology_spread_constraints=tuple(constraints),
    )


@settings(max_examples=500, deadline=None)
@given(cluster=clusters(), pod=spread_pods())
def test_filter_matches_plain_reference(
    cluster: tuple[list[models.Node], list[models.Pod]], pod: models.Pod
) -> None:
    nodes, pods = cluster
    table = builders.table_of(nodes, pods)
    add_remove_churn(table, pods)
    assert run_filter(pod, table) == reference_spread_filter(pod, nodes, pods)


def test_pod_group_index_tracks_updates_of_the_same_pod() -> None:
    table = builders.table_of(four_nodes(), [builders.pod("a", node="node-a", labels={"foo": ""})])
    # Re-adding the pod with new labels (an update) moves it to another group.
    table.add_pod("node-a", builders.pod("a", labels={"bar": ""}))
    groups = {tuple(sorted(g.labels)): dict(g.on_node) for g in table.pod_groups.values()}
    assert groups == {("bar",): {"node-a": 1}}
    table.add_pod("node-b", builders.pod("b", labels={"bar": ""}))
    table.add_pod("node-b", builders.pod("c", labels={"bar": ""}))
    (group,) = table.pod_groups.values()
    assert group.on_node == {"node-a": 1, "node-b": 2}
    table.remove_node("node-b")
    assert group.on_node == {"node-a": 1}
    table.remove_pod("node-a", "uid-default-a")
    assert table.pod_groups == {}


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(st.integers(min_value=-1, max_value=19), max_size=30),
    domains=st.lists(st.booleans(), min_size=20, max_size=20),  # 20: every way is taken
)
def test_rows_in_domains_is_a_gather_by_domain_id(ids: list[int], domains: list[bool]) -> None:
    """Whichever way `rows_in` picks (compare the few in, the few out, or gather), a row is
    in when its domain is, and a row without the label (-1) never is."""
    from splitsched.core.plugins.domains import rows_in

    got = rows_in(np.asarray(ids, dtype=np.int32), np.asarray(domains, dtype=np.bool_))
    assert got.tolist() == [i >= 0 and domains[i] for i in ids]
