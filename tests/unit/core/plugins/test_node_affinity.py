"""NodeAffinity: nodeSelector, required terms (ORed terms, ANDed requirements, every
operator), matchFields on metadata.name, preferred-term scoring and addedAffinity."""

from __future__ import annotations

import pytest

from splitsched.core import framework, models
from splitsched.core.plugins.node_affinity import (
    REASON_ENFORCED,
    REASON_POD,
    NodeAffinity,
    node_matches_mask,
)
from tests.support.builders import all_rows, bools, floats, fresh_state, node, pod, table_of

R = models.NodeSelectorRequirement
T = models.NodeSelectorTerm


def required(*terms: models.NodeSelectorTerm) -> models.NodeAffinity:
    return models.NodeAffinity(required=tuple(terms))


def expr(key: str, op: str, *values: str) -> models.NodeSelectorTerm:
    return T(match_expressions=(R(key, op, tuple(values)),))


NODES = [
    node("n0", labels={"zone": "a", "gen": "3", "ssd": "true"}),
    node("n1", labels={"zone": "b", "gen": "5"}),
    node("n2", labels={"zone": "c", "gen": "x"}),
    node("n3", labels={}),
]


def run(
    p: models.Pod, plugin: NodeAffinity | None = None, nodes: list[models.Node] = NODES
) -> list[bool]:
    plugin = plugin or NodeAffinity()
    table = table_of(nodes)
    state = fresh_state()
    status = plugin.pre_filter(state, p, table)
    if status.code == framework.Code.SKIP:
        return [True] * table.n
    assert status.ok, status
    mask = plugin.filter(state, p, table)
    assert (mask == node_matches_mask(table, p)).all() or plugin.added_required is not None
    return bools(mask)


def test_no_selector_no_affinity_skips_prefilter() -> None:
    table = table_of(NODES)
    assert NodeAffinity().pre_filter(fresh_state(), pod(), table).code == framework.Code.SKIP
    assert node_matches_mask(table, pod()).tolist() == [True] * 4


def test_node_selector_needs_every_pair() -> None:
    assert run(pod(node_selector={"zone": "a"})) == [True, False, False, False]
    assert run(pod(node_selector={"zone": "a", "ssd": "true"})) == [True, False, False, False]
    assert run(pod(node_selector={"zone": "b", "ssd": "true"})) == [False] * 4
    assert run(pod(node_selector={"missing": "x"})) == [False] * 4


def test_in_and_notin() -> None:
    assert run(pod(node_affinity=required(expr("zone", "In", "a", "b")))) == [
        True,
        True,
        False,
        False,
    ]
    # NotIn is also true where the label is absent (n3).
    assert run(pod(node_affinity=required(expr("zone", "NotIn", "a", "b")))) == [
        False,
        False,
        True,
        True,
    ]


def test_exists_and_does_not_exist() -> None:
    assert run(pod(node_affinity=required(expr("ssd", "Exists")))) == [True, False, False, False]
    assert run(pod(node_affinity=required(expr("ssd", "DoesNotExist")))) == [
        False,
        True,
        True,
        True,
    ]


def test_gt_and_lt_compare_integers_and_skip_unparsable() -> None:
    # gen: 3, 5, "x" (unparsable: never matches), absent (never matches).
    assert run(pod(node_affinity=required(expr("gen", "Gt", "4")))) == [False, True, False, False]
    assert run(pod(node_affinity=required(expr("gen", "Lt", "4")))) == [True, False, False, False]
    assert run(pod(node_affinity=required(expr("gen", "Gt", "3")))) == [False, True, False, False]
    nodes = [node("neg", labels={"gen": "-7"}), node("big", labels={"gen": "+12"})]
    assert run(pod(node_affinity=required(expr("gen", "Lt", "0"))), nodes=nodes) == [True, False]
    assert run(pod(node_affinity=required(expr("gen", "Gt", "10"))), nodes=nodes) == [False, True]


def test_invalid_requirement_matches_nothing() -> None:
    # Gt needs exactly one integer value; In needs values; Exists takes none.
    for term in (
        expr("gen", "Gt", "four"),
        expr("gen", "Gt", "1", "2"),
        expr("zone", "In"),
        expr("ssd", "Exists", "true"),
        expr("zone", "Bogus", "a"),
    ):
        assert run(pod(node_affinity=required(term))) == [False] * 4


@pytest.mark.parametrize(
    "term",
    [
        # What the API server stores but labels.NewRequirement refuses: kube-scheduler's
        # term matches no node even where the valid part of it would.
        expr("zone", "In", "a", "not a label value"),  # a value with spaces
        expr("zone", "NotIn", "-x"),  # a value must start alphanumeric
        expr("zone", "In", "a", "x" * 64),  # longer than 63
        expr("zone", "In", "a", "team/a"),  # "/" is no label value character
        expr("gen", "Gt", "+4"),  # ParseInt takes it, the label-value check does not
        expr("gen", "Lt", "-1"),
        expr("bad key!", "Exists"),
    ],
    ids=["space", "leading-dash", "too-long", "slash", "plus-sign", "negative", "key"],
)
def test_a_term_the_label_selector_parser_refuses_matches_nothing(
    term: models.NodeSelectorTerm,
) -> None:
    assert run(pod(node_affinity=required(term))) == [False] * 4
    # ORed with a valid term, only the valid one counts.
    assert run(pod(node_affinity=required(term, expr("zone", "In", "b")))) == [
        False,
        True,
        False,
        False,
    ]


def test_requirements_in_a_term_are_anded() -> None:
    term = T(match_expressions=(R("zone", "In", ("a", "b")), R("gen", "Gt", ("4",))))
    assert run(pod(node_affinity=required(term))) == [False, True, False, False]


def test_terms_are_ored() -> None:
    aff = required(expr("zone", "In", "a"), expr("zone", "In", "c"))
    assert run(pod(node_affinity=aff)) == [True, False, True, False]


def test_invalid_term_does_not_spoil_the_others() -> None:
    aff = required(expr("gen", "Gt", "bad"), expr("zone", "In", "b"))
    assert run(pod(node_affinity=aff)) == [False, True, False, False]


def test_empty_term_matches_nothing() -> None:
    assert run(pod(node_affinity=required(T()))) == [False] * 4
    assert run(pod(node_affinity=required(T(), expr("zone", "In", "a")))) == [
        True,
        False,
        False,
        False,
    ]


def test_required_with_no_terms_matches_nothing() -> None:
    assert run(pod(node_affinity=models.NodeAffinity(required=()))) == [False] * 4


def test_preferred_only_affinity_does_not_filter() -> None:
    pref = models.PreferredSchedulingTerm(weight=5, preference=expr("zone", "In", "a"))
    p = pod(node_affinity=models.NodeAffinity(preferred=(pref,)))
    table = table_of(NODES)
    assert NodeAffinity().pre_filter(fresh_state(), p, table).code == framework.Code.SKIP


def test_selector_and_affinity_both_apply() -> None:
    p = pod(node_selector={"ssd": "true"}, node_affinity=required(expr("zone", "In", "a", "b")))
    assert run(p) == [True, False, False, False]


def test_match_fields_metadata_name() -> None:
    in_n1 = T(match_fields=(R("metadata.name", "In", ("n1",)),))
    assert run(pod(node_affinity=required(in_n1))) == [False, True, False, False]
    not_n1 = T(match_fields=(R("metadata.name", "NotIn", ("n1",)),))
    assert run(pod(node_affinity=required(not_n1))) == [True, False, True, True]
    # matchFields takes exactly one value.
    two = T(match_fields=(R("metadata.name", "In", ("n1", "n2")),))
    assert run(pod(node_affinity=required(two))) == [False] * 4


def test_match_fields_and_expressions_are_anded() -> None:
    term = T(
        match_expressions=(R("zone", "In", ("a", "b")),),
        match_fields=(R("metadata.name", "In", ("n1",)),),
    )
    assert run(pod(node_affinity=required(term))) == [False, True, False, False]
    term_b = T(
        match_expressions=(R("zone", "In", ("a",)),),
        match_fields=(R("metadata.name", "In", ("n1",)),),
    )
    assert run(pod(node_affinity=required(term_b))) == [False] * 4


def test_conflicting_node_name_pins_rejected_at_prefilter() -> None:
    term = T(
        match_fields=(
            R("metadata.name", "In", ("n1",)),
            R("metadata.name", "In", ("n2",)),
        )
    )
    p = pod(node_affinity=required(term))
    status = NodeAffinity().pre_filter(fresh_state(), p, table_of(NODES))
    assert status.code == framework.Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("pod affinity terms conflict",)


def test_failure_reason() -> None:
    p = pod(node_selector={"zone": "z"})
    table = table_of(NODES)
    reasons = NodeAffinity().failure_reasons(fresh_state(), p, table, [0, 3])
    assert reasons == [("node(s) didn't match Pod's node affinity/selector",)] * 2
    assert NodeAffinity.resolvable_by_preemption is False
    assert framework.ClusterEvent.NODE_LABEL in NodeAffinity.events


# ---- score --------------------------------------------------------------------------------


def pref(weight: int, term: models.NodeSelectorTerm) -> models.PreferredSchedulingTerm:
    return models.PreferredSchedulingTerm(weight=weight, preference=term)


def scores(p: models.Pod, plugin: NodeAffinity | None = None) -> tuple[list[float], list[float]]:
    plugin = plugin or NodeAffinity()
    table = table_of(NODES)
    state = fresh_state()
    rows = all_rows(table)
    assert plugin.pre_score(state, p, table, rows).code == framework.Code.SUCCESS
    raw = plugin.score(state, p, table, rows)
    return floats(raw), floats(plugin.normalize(state, p, raw))


def test_no_preferred_terms_skips_scoring() -> None:
    table = table_of(NODES)
    status = NodeAffinity().pre_score(fresh_state(), pod(), table, all_rows(table))
    assert status.code == framework.Code.SKIP


def test_preferred_weights_sum_and_normalise() -> None:
    aff = models.NodeAffinity(
        preferred=(
            pref(2, expr("zone", "In", "a", "b")),
            pref(6, expr("gen", "Gt", "4")),
            pref(0, expr("zone", "In", "c")),  # weight 0 is ignored
            pref(9, T()),  # an empty term matches nothing
        )
    )
    raw, norm = scores(pod(node_affinity=aff))
    # n0: 2; n1: 2 + 6 = 8; n2, n3: 0. Normalised to the best: 25, 100, 0, 0.
    assert raw == [2.0, 8.0, 0.0, 0.0]
    assert norm == [25.0, 100.0, 0.0, 0.0]


def test_no_match_anywhere_normalises_to_zero() -> None:
    aff = models.NodeAffinity(preferred=(pref(3, expr("zone", "In", "zz")),))
    raw, norm = scores(pod(node_affinity=aff))
    assert raw == [0.0] * 4 and norm == [0.0] * 4


# ---- addedAffinity ------------------------------------------------------------------------

ADDED = {
    "addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 4,
                "preference": {
                    "matchExpressions": [{"key": "ssd", "operator": "Exists"}],
                },
            }
        ],
    }
}


def test_added_affinity_applies_to_every_pod() -> None:
    plugin = NodeAffinity(ADDED)
    assert run(pod(), plugin) == [True, True, False, False]
    assert run(pod(node_selector={"zone": "c"}), plugin) == [False] * 4
    table = table_of(NODES)
    reasons = plugin.failure_reasons(fresh_state(), pod(node_selector={"zone": "a"}), table, [1, 2])
    assert reasons == [(REASON_POD,), (REASON_ENFORCED,)]


def test_added_preferred_terms_score() -> None:
    raw, norm = scores(pod(), NodeAffinity(ADDED))
    assert raw == [4.0, 0.0, 0.0, 0.0] and norm == [100.0, 0.0, 0.0, 0.0]


def test_invalid_added_affinity_rejected() -> None:
    bad = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["x"]}]}
                ]
            }
        }
    }
    with pytest.raises(ValueError):
        NodeAffinity(bad)


def test_a_preferred_term_the_parser_refuses_fails_pre_score_with_kubes_message() -> None:
    """The API always accepts such a value in a preferred term; kube-scheduler's
    NodeAffinity PreScore then returns the parser's error (so the pod waits while more
    than one node fits it)."""
    table = table_of(NODES)
    aff = models.NodeAffinity(
        preferred=(pref(1, expr("zone", "In", "a")), pref(5, expr("gen", "Gt", "four")))
    )
    status = NodeAffinity().pre_score(fresh_state(), pod(node_affinity=aff), table, all_rows(table))
    assert status.code is framework.Code.ERROR and status.plugin == "NodeAffinity"
    assert status.reasons == (
        '[1].matchExpressions[0].values[0]: Invalid value: "four": '
        "for 'Gt', 'Lt' operators, the value must be an integer",
    )
    # A weight-0 term is skipped before it is parsed, as kube does.
    zero = models.NodeAffinity(preferred=(pref(0, expr("gen", "Gt", "four")),))
    ok = NodeAffinity().pre_score(fresh_state(), pod(node_affinity=zero), table, all_rows(table))
    assert ok.ok
