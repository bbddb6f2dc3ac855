"""Selectors and affinity terms: label selectors, node selector terms, node and pod affinity.

Read by the pod converter (spec.affinity, topology spread constraints' labelSelector).
Every function reads one object with paths relative to it; the caller re-roots errors.
A null label selector stays None, which matches nothing where the API allows one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from splitsched.core import models
from splitsched.core.convert import fast
from splitsched.core.convert.fields import (
    BadField,
    as_int,
    as_list,
    as_object,
    as_str_map,
    as_str_tuple,
    at,
    each,
    required_str,
    show,
    type_name,
)

NODE_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
LABEL_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _requirements(
    value: object, path: str, ops: frozenset[str], make: Callable[..., Any]
) -> tuple[Any, ...]:
    out = []
    for i, raw in enumerate(as_list(value, path)):
        if not isinstance(raw, dict):
            raise BadField(f"{path}[{i}]", f"expected an object, got {type_name(raw)}")
        key = raw.get("key")
        if not isinstance(key, str) or not key:
            raise BadField(
                f"{path}[{i}].key", "required" if key is None else "expected a non-empty string"
            )
        op = raw.get("operator")
        if not isinstance(op, str) or op not in ops:
            raise BadField(f"{path}[{i}].operator", f"unsupported operator {show(op)}")
        values = raw.get("values")
        out.append(
            make(
                key=key,
                operator=op,
                values=as_str_tuple(values, f"{path}[{i}].values") if values else (),
            )
        )
    return tuple(out)


# ---- node selectors and node affinity ---------------------------------------------------


def _node_selector_term(value: object) -> models.NodeSelectorTerm:
    term = as_object(value, "")
    exprs = term.get("matchExpressions")
    fields = term.get("matchFields")
    make = fast.NodeSelectorRequirement
    return fast.NodeSelectorTerm(
        match_expressions=_requirements(exprs, "matchExpressions", NODE_SELECTOR_OPS, make)
        if exprs
        else (),
        match_fields=_requirements(fields, "matchFields", NODE_SELECTOR_OPS, make)
        if fields
        else (),
    )


node_selector_term = _node_selector_term  # PersistentVolumes' node affinity reads them too


def _preferred_scheduling_term(value: object) -> models.PreferredSchedulingTerm:
    item = as_object(value, "")
    return fast.PreferredSchedulingTerm(
        weight=as_int(item.get("weight"), "weight", low=0, high=100),
        preference=_node_selector_term(item.get("preference")),
    )


def node_affinity(value: object) -> models.NodeAffinity | None:
    """spec.affinity.nodeAffinity; a required part that is present but empty stays ()."""
    if value is None:
        return None
    na = as_object(value, "")
    required: tuple[models.NodeSelectorTerm, ...] | None = None
    raw_required = na.get(REQUIRED)
    if raw_required is not None:
        terms = as_object(raw_required, REQUIRED).get("nodeSelectorTerms")
        required = each(terms, f"{REQUIRED}.nodeSelectorTerms", _node_selector_term)
    return fast.NodeAffinity(
        required=required, preferred=each(na.get(PREFERRED), PREFERRED, _preferred_scheduling_term)
    )


# ---- label selectors and pod affinity ---------------------------------------------------


def label_selector(value: object) -> models.LabelSelector | None:
    """None stays None (matches nothing where the API allows a null selector)."""
    if value is None:
        return None
    sel = as_object(value, "")
    labels = sel.get("matchLabels")
    exprs = sel.get("matchExpressions")
    return fast.LabelSelector(
        match_labels=tuple(as_str_map(labels, "matchLabels").items()) if labels else (),
        match_expressions=_requirements(
            exprs, "matchExpressions", LABEL_SELECTOR_OPS, fast.LabelSelectorRequirement
        )
        if exprs
        else (),
    )


def _pod_affinity_term(value: object) -> models.PodAffinityTerm:
    term = as_object(value, "")
    topology_key = required_str(term, "topologyKey")
    namespaces = term.get("namespaces")
    match_keys = term.get("matchLabelKeys")
    mismatch_keys = term.get("mismatchLabelKeys")
    return fast.PodAffinityTerm(
        label_selector=at(term.get("labelSelector"), "labelSelector", label_selector),
        topology_key=topology_key,
        namespaces=as_str_tuple(namespaces, "namespaces") if namespaces else (),
        namespace_selector=at(term.get("namespaceSelector"), "namespaceSelector", label_selector),
        match_label_keys=as_str_tuple(match_keys, "matchLabelKeys") if match_keys else (),
        mismatch_label_keys=as_str_tuple(mismatch_keys, "mismatchLabelKeys")
        if mismatch_keys
        else (),
    )


def _weighted_pod_affinity_term(value: object) -> models.WeightedPodAffinityTerm:
    item = as_object(value, "")
    weight = as_int(item.get("weight"), "weight", low=0, high=100)
    term = at(item.get("podAffinityTerm"), "podAffinityTerm", _pod_affinity_term)
    return fast.WeightedPodAffinityTerm(weight=weight, term=term)


def pod_affinity(value: object) -> models.PodAffinity | None:
    """spec.affinity.podAffinity or podAntiAffinity (the same shape)."""
    if value is None:
        return None
    pa = as_object(value, "")
    return fast.PodAffinity(
        required=each(pa.get(REQUIRED), REQUIRED, _pod_affinity_term),
        preferred=each(pa.get(PREFERRED), PREFERRED, _weighted_pod_affinity_term),
    )
