"""For random small clusters and pods, each vectorised Filter mask equals a plain per-node
reference predicate written straight from kube-scheduler's per-node code."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core import framework, models
from splitsched.core.plugins.node_affinity import NodeAffinity
from splitsched.core.plugins.node_ports import NodePorts
from splitsched.core.plugins.resources_fit import NodeResourcesFit
from splitsched.core.plugins.taint_toleration import TaintToleration
from tests.support.builders import bools, fresh_state, table_of

GPU = "example.com/gpu"
FPGA = "example.com/fpga"  # offered by no node: always insufficient when requested
KEYS = ("zone", "gen", "ssd")
VALUES = ("a", "b", "1", "5", "x", "-2")
OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)
taint_st = st.builds(
    models.Taint,
    key=st.sampled_from(("k1", "k2")),
    value=st.sampled_from(("", "v")),
    effect=st.sampled_from(("NoSchedule", "PreferNoSchedule", "NoExecute")),
)
toleration_st = st.builds(
    models.Toleration,
    key=st.sampled_from(("", "k1", "k2")),
    operator=st.sampled_from(("Equal", "Exists")),
    value=st.sampled_from(("", "v")),
    effect=st.sampled_from(("", "NoSchedule", "PreferNoSchedule", "NoExecute")),
)
port_st = st.builds(
    models.HostPort,
    port=st.sampled_from((80, 443)),
    protocol=st.sampled_from(("TCP", "UDP", "")),
    host_ip=st.sampled_from(("", "0.0.0.0", "10.0.0.1", "10.0.0.2")),
)
requests_st = st.fixed_dictionaries(
    {},
    optional={
        models.CPU: st.integers(0, 4),
        models.MEMORY: st.integers(0, 4),
        GPU: st.integers(0, 2),
    },
)


@st.composite
def requirement_st(draw: st.DrawFn) -> models.NodeSelectorRequirement:
    op = draw(st.sampled_from(OPS))
    n_values = {"In": (0, 2), "NotIn": (0, 2), "Gt": (1, 1), "Lt": (1, 1)}.get(op, (0, 1))
    values = draw(st.lists(st.sampled_from(VALUES), min_size=n_values[0], max_size=n_values[1]))
    return models.NodeSelectorRequirement(draw(st.sampled_from(KEYS)), op, tuple(values))


# Mostly empty, so a selector or a name pin does not hide what the expressions do.
selector_st: st.SearchStrategy[dict[str, str]] = st.sampled_from(
    ({}, {}, {}, {"zone": "a"}, {"gen": "5"})
)
field_st = st.builds(
    models.NodeSelectorRequirement,
    key=st.sampled_from(("metadata.name", "metadata.name", "spec.other")),
    operator=st.sampled_from(("In", "NotIn")),
    values=st.lists(st.sampled_from(("n0", "n1", "n2", "")), min_size=1, max_size=2).map(tuple),
)
term_st = st.builds(
    models.NodeSelectorTerm,
    match_expressions=st.lists(requirement_st(), max_size=2).map(tuple),
    match_fields=st.just(()) | st.just(()) | st.lists(field_st, max_size=1).map(tuple),
)
affinity_st = st.one_of(
    st.none(),
    st.builds(models.NodeAffinity, required=st.lists(term_st, min_size=1, max_size=2).map(tuple)),
    st.just(models.NodeAffinity(required=())),
)


@st.composite
def pod_st(draw: st.DrawFn, name: str, node_name: str = "") -> models.Pod:
    reqs = draw(requests_st)
    if draw(st.booleans()):
        reqs[FPGA] = 1
    return models.Pod(
        uid=name,
        namespace="default",
        name=name,
        node_name=node_name,
        containers=(
            models.Container(
                name="c",
                requests=reqs,
                host_ports=tuple(draw(st.lists(port_st, max_size=2))),
            ),
        ),
        node_selector=draw(selector_st),
        node_affinity=draw(affinity_st),
        tolerations=tuple(draw(st.lists(toleration_st, max_size=2))),
    )


@st.composite
def cluster_st(draw: st.DrawFn) -> tuple[list[models.Node], dict[str, list[models.Pod]]]:
    nodes: list[models.Node] = []
    placed: dict[str, list[models.Pod]] = {}
    for i in range(draw(st.integers(1, 5))):
        alloc = {
            models.CPU: draw(st.integers(0, 6)),
            models.MEMORY: draw(st.integers(0, 6)),
            models.PODS: draw(st.integers(0, 3)),
        }
        if draw(st.booleans()):
            alloc[GPU] = draw(st.integers(0, 2))
        name = f"n{i}"
        nodes.append(
            models.Node(
                name=name,
                labels=draw(labels_st),
                taints=tuple(draw(st.lists(taint_st, max_size=2))),
                allocatable=alloc,
            )
        )
        placed[name] = [
            draw(pod_st(f"{name}-p{j}", node_name=name)) for j in range(draw(st.integers(0, 2)))
        ]
    return nodes, placed


# ---- plain references ---------------------------------------------------------------------


def ref_fits(p: models.Pod, nd: models.Node, placed: Sequence[models.Pod]) -> bool:
    if len(placed) + 1 > nd.allocatable.get(models.PODS, 0):
        return False
    for name, amount in p.requests.items():
        if amount <= 0:
            continue
        used = sum(q.requests.get(name, 0) for q in placed)
        if amount > nd.allocatable.get(name, 0) - used:
            return False
    return True


def ref_int(text: str) -> int | None:
    try:
        return int(text) if text.strip() == text and "_" not in text else None
    except ValueError:
        return None


def ref_requirement(r: models.NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    has = r.key in labels
    if r.operator == "In":
        return has and labels[r.key] in r.values
    if r.operator == "NotIn":
        return not has or labels[r.key] not in r.values
    if r.operator == "Exists":
        return has
    if r.operator == "DoesNotExist":
        return not has
    bound = ref_int(r.values[0])
    value = ref_int(labels[r.key]) if has else None
    if bound is None or value is None:
        return False
    return value > bound if r.operator == "Gt" else value < bound


#: A label value as the API's label-selector parser accepts it (kube's LazyErrorNodeSelector
#: makes a term with any other value match no node: labels.NewRequirement checks every
#: value, Gt/Lt's too, so "-2" is refused though it is an int64).
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def ref_valid(r: models.NodeSelectorRequirement) -> bool:
    if r.operator in ("In", "NotIn"):
        return bool(r.values) and all(len(v) <= 63 and LABEL_VALUE.fullmatch(v) for v in r.values)
    if r.operator in ("Exists", "DoesNotExist"):
        return not r.values
    return (
        len(r.values) == 1
        and ref_int(r.values[0]) is not None
        and LABEL_VALUE.fullmatch(r.values[0]) is not None
    )


def ref_term(t: models.NodeSelectorTerm, nd: models.Node) -> bool:
    if not t.match_expressions and not t.match_fields:
        return False
    if not all(ref_valid(r) for r in t.match_expressions):
        return False
    if not all(len(r.values) == 1 for r in t.match_fields):
        return False
    for r in t.match_expressions:
        if not ref_requirement(r, nd.labels):
            return False
    fields = {"metadata.name": nd.name}
    for r in t.match_fields:
        equal = fields.get(r.key, "") == r.values[0]
        if equal != (r.operator == "In"):
            return False
    return True


def ref_affinity(p: models.Pod, nd: models.Node) -> bool:
    if any(nd.labels.get(k) != v for k, v in p.node_selector.items()):
        return False
    if p.node_affinity is not None and p.node_affinity.required is not None:
        return any(ref_term(t, nd) for t in p.node_affinity.required)
    return True


def ref_tolerates(tol: models.Toleration, taint: models.Taint) -> bool:
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator == "Exists":
        return True
    # Equal: Go's ToleratesTaint compares values only (the key was checked above when set).
    return tol.value == taint.value


def ref_taints(p: models.Pod, nd: models.Node) -> bool:
    return all(
        any(ref_tolerates(tol, taint) for tol in p.tolerations)
        for taint in nd.taints
        if taint.effect in ("NoSchedule", "NoExecute")
    )


def ref_ports(p: models.Pod, placed: Sequence[models.Pod]) -> bool:
    def norm(hp: models.HostPort) -> tuple[str, str, int]:
        return (hp.protocol or "TCP", hp.host_ip or "0.0.0.0", hp.port)

    used = [norm(hp) for q in placed for c in q.containers for hp in c.host_ports]
    for want in (norm(hp) for c in p.containers for hp in c.host_ports):
        for have in used:
            same = want[0] == have[0] and want[2] == have[2]
            if same and (want[1] == have[1] or "0.0.0.0" in (want[1], have[1])):
                return False
    return True


# ---- the property -------------------------------------------------------------------------


def mask_of(plugin: object, p: models.Pod, table: object) -> list[bool]:
    state = fresh_state()
    pre = getattr(plugin, "pre_filter", None)
    if pre is not None:
        status: framework.Status = pre(state, p, table)
        if status.code == framework.Code.SKIP:
            return [True] * table.n  # type: ignore[attr-defined]
        if not status.ok:
            return [False] * table.n  # type: ignore[attr-defined]
    return bools(plugin.filter(state, p, table))  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(cluster=cluster_st(), candidate=pod_st("candidate"))
def test_filters_match_per_node_reference(
    cluster: tuple[list[models.Node], dict[str, list[models.Pod]]], candidate: models.Pod
) -> None:
    nodes, placed = cluster
    table = table_of(nodes, assigned=placed)
    rows = [table.row_of[nd.name] for nd in nodes]

    def by_row(expected: list[bool]) -> list[bool]:
        out = [False] * len(nodes)
        for i, row in enumerate(rows):
            out[row] = expected[i]
        return out

    assert mask_of(NodeResourcesFit(), candidate, table) == by_row(
        [ref_fits(candidate, nd, placed[nd.name]) for nd in nodes]
    )
    assert mask_of(NodeAffinity(), candidate, table) == by_row(
        [ref_affinity(candidate, nd) for nd in nodes]
    )
    assert mask_of(TaintToleration(), candidate, table) == by_row(
        [ref_taints(candidate, nd) for nd in nodes]
    )
    assert mask_of(NodePorts(), candidate, table) == by_row(
        [ref_ports(candidate, placed[nd.name]) for nd in nodes]
    )
