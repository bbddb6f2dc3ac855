"""Where a slice's (or a device's) devices can be used: kube's NodeMatches, one node at a
time (the scheduler's NodeTable masks do the same for every node at once)."""

from __future__ import annotations

from splitsched.core import models
from splitsched.core.selector_syntax import parse_int64, term_parses

NAME_FIELD = "metadata.name"


def usable_on(
    node: models.Node,
    node_name: str,
    all_nodes: bool,
    node_selector: tuple[models.NodeSelectorTerm, ...] | None,
) -> bool:
    """The first of the three that is set decides; none set matches no node."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if node_selector is not None:
        return any(term_matches(node, term) for term in node_selector)
    return False


def term_matches(node: models.Node, term: models.NodeSelectorTerm) -> bool:
    """Requirements ANDed; an empty term, or one that does not parse, matches nothing."""
    if (not term.match_expressions and not term.match_fields) or not term_parses(term):
        return False
    return all(_expression(node, r) for r in term.match_expressions) and all(
        _field(node, r) for r in term.match_fields
    )


def _expression(node: models.Node, req: models.NodeSelectorRequirement) -> bool:
    value = node.labels.get(req.key)
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    if req.operator == "DoesNotExist":
        return value is None
    parsed, bound = parse_int64(value or ""), parse_int64(req.values[0])
    if parsed is None or bound is None:
        return False
    return parsed > bound if req.operator == "Gt" else parsed < bound


def _field(node: models.Node, req: models.NodeSelectorRequirement) -> bool:
    value = node.name if req.key == NAME_FIELD else ""  # nodes expose no other field
    hit = value == req.values[0]
    return hit if req.operator == "In" else not hit
