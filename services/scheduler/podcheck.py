"""What the API server would refuse in a Pod given in the contract's form.

`Scheduler.Simulate` accepts pods as `types_pb2.Pod` messages. Pods that come from the
watcher were validated by the API server (and manifests by the strict converter,
`splitsched.core.convert`), so the scheduling plugins may rely on what it guarantees: a
spread constraint has a topology key and a positive skew, selector operators are known,
weights are 1..100. A hand-made message guarantees none of that; `problem` names the first
field that breaks one of those rules, so Simulate answers INVALID_ARGUMENT instead of
failing inside a plugin. Called by `services.scheduler.api`; pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from splitsched.core import models
from splitsched.v1 import types_pb2

NODE_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
LABEL_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
TOLERATION_OPS = frozenset({"", "Equal", "Exists"})
TOLERATION_EFFECTS = frozenset({"", "NoSchedule", "PreferNoSchedule", "NoExecute"})
WHEN_UNSATISFIABLE = frozenset({"DoNotSchedule", "ScheduleAnyway"})
POLICIES = frozenset({"", "Honor", "Ignore"})
PREEMPTION_POLICIES = frozenset({"", "PreemptLowerPriority", "Never"})
PROTOCOLS = frozenset({"", "TCP", "UDP", "SCTP"})
INT32_MAX = 2**31 - 1
STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
# An extended resource: a DNS-subdomain prefix, "/", a name (the API's qualified name).
_QUALIFIED = re.compile(
    r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)


class _Bad(ValueError):
    pass


def _requirements(
    reqs: Iterable[types_pb2.NodeSelectorRequirement | types_pb2.LabelSelectorRequirement],
    path: str,
    ops: frozenset[str],
) -> None:
    for i, r in enumerate(reqs):
        at = f"{path}[{i}]"
        if not r.key:
            raise _Bad(f"{at}.key: required")
        if r.operator not in ops:
            raise _Bad(f"{at}.operator: unsupported operator {r.operator!r}")
        if r.operator in ("In", "NotIn") and not r.values:
            raise _Bad(f"{at}.values: must be non-empty for {r.operator}")
        if r.operator in ("Exists", "DoesNotExist") and r.values:
            raise _Bad(f"{at}.values: must be empty for {r.operator}")
        if r.operator in ("Gt", "Lt"):
            if len(r.values) != 1:
                raise _Bad(f"{at}.values: {r.operator} takes exactly one value")
            try:
                int(r.values[0])
            except ValueError:
                raise _Bad(f"{at}.values[0]: {r.values[0]!r} is not an integer") from None


def _selector(sel: types_pb2.LabelSelector, path: str) -> None:
    _requirements(sel.match_expressions, f"{path}.match_expressions", LABEL_SELECTOR_OPS)


def _weight(weight: int, path: str) -> None:
    if not 1 <= weight <= 100:
        raise _Bad(f"{path}.weight: {weight} is out of range [1, 100]")


def _node_term(term: types_pb2.NodeSelectorTerm, path: str) -> None:
    _requirements(term.match_expressions, f"{path}.match_expressions", NODE_SELECTOR_OPS)
    _requirements(term.match_fields, f"{path}.match_fields", NODE_SELECTOR_OPS)


def _pod_term(term: types_pb2.PodAffinityTerm, path: str) -> None:
    if not term.topology_key:
        raise _Bad(f"{path}.topology_key: required")
    if term.HasField("label_selector"):
        _selector(term.label_selector, f"{path}.label_selector")
    if term.HasField("namespace_selector"):
        _selector(term.namespace_selector, f"{path}.namespace_selector")


def _pod_affinity(pa: types_pb2.PodAffinity, path: str) -> None:
    for i, term in enumerate(pa.required):
        _pod_term(term, f"{path}.required[{i}]")
    for i, weighted in enumerate(pa.preferred):
        _weight(weighted.weight, f"{path}.preferred[{i}]")
        _pod_term(weighted.term, f"{path}.preferred[{i}].term")


def _check(pod: types_pb2.Pod) -> None:
    if pod.preemption_policy not in PREEMPTION_POLICIES:
        raise _Bad(f"preemption_policy: unsupported value {pod.preemption_policy!r}")
    for field, containers in (
        ("containers", pod.containers),
        ("init_containers", pod.init_containers),
    ):
        for i, c in enumerate(containers):
            for j, hp in enumerate(c.host_ports):
                at = f"{field}[{i}].host_ports[{j}]"
                if not 1 <= hp.port <= 65535:
                    raise _Bad(f"{at}.port: {hp.port} is out of range [1, 65535]")
                if hp.protocol not in PROTOCOLS:
                    raise _Bad(f"{at}.protocol: unsupported value {hp.protocol!r}")
    if pod.HasField("node_affinity"):
        na = pod.node_affinity
        for i, term in enumerate(na.required):
            _node_term(term, f"node_affinity.required[{i}]")
        for i, pref in enumerate(na.preferred):
            _weight(pref.weight, f"node_affinity.preferred[{i}]")
            _node_term(pref.preference, f"node_affinity.preferred[{i}].preference")
    if pod.HasField("pod_affinity"):
        _pod_affinity(pod.pod_affinity, "pod_affinity")
    if pod.HasField("pod_anti_affinity"):
        _pod_affinity(pod.pod_anti_affinity, "pod_anti_affinity")
    for i, t in enumerate(pod.tolerations):
        at = f"tolerations[{i}]"
        if t.operator not in TOLERATION_OPS:
            raise _Bad(f"{at}.operator: unsupported value {t.operator!r}")
        if t.effect not in TOLERATION_EFFECTS:
            raise _Bad(f"{at}.effect: unsupported value {t.effect!r}")
        if t.operator == "Exists" and t.value:
            raise _Bad(f"{at}.value: must be empty with operator Exists")
    for i, s in enumerate(pod.topology_spread_constraints):
        at = f"topology_spread_constraints[{i}]"
        if not s.topology_key:
            raise _Bad(f"{at}.topology_key: required")
        if s.max_skew < 1:
            raise _Bad(f"{at}.max_skew: {s.max_skew} is out of range [1, {INT32_MAX}]")
        if s.when_unsatisfiable not in WHEN_UNSATISFIABLE:
            raise _Bad(f"{at}.when_unsatisfiable: unsupported value {s.when_unsatisfiable!r}")
        if s.HasField("min_domains") and s.min_domains < 1:
            raise _Bad(f"{at}.min_domains: {s.min_domains} is out of range [1, {INT32_MAX}]")
        for name in ("node_affinity_policy", "node_taints_policy"):
            if getattr(s, name) not in POLICIES:
                raise _Bad(f"{at}.{name}: unsupported value {getattr(s, name)!r}")
        if s.HasField("label_selector"):
            _selector(s.label_selector, f"{at}.label_selector")
    if pod.HasField("group") and pod.group.min_member < 0:
        raise _Bad(f"group.min_member: {pod.group.min_member} must not be negative")


def problem(pod: types_pb2.Pod) -> str | None:
    """ "<field path>: <what is wrong>" for the first rule `pod` breaks, or None."""
    try:
        _check(pod)
    except _Bad as exc:
        return str(exc)
    return None


def _resource_ok(name: str, *, pod_level: bool) -> bool:
    if name.startswith("hugepages-") and len(name) > len("hugepages-"):
        return True
    if pod_level:
        return name in POD_LEVEL_RESOURCES
    return name in STANDARD_RESOURCES or bool(len(name) <= 317 and _QUALIFIED.fullmatch(name))


def resource_problem(pod: models.Pod) -> str | None:
    """The first resource name the API server would refuse in `pod`'s requests, as
    "<field path>: ...". Such names never reach the scheduler from the watcher; in Simulate
    a pod could be placed with one (no plugin knows it) and leave a column for it behind."""
    lists: list[tuple[str, Mapping[str, int], bool]] = [
        ("overhead", pod.overhead, False),
        ("pod_requests", pod.pod_requests, True),
    ]
    for field, containers in (
        ("containers", pod.containers),
        ("init_containers", pod.init_containers),
    ):
        lists += [(f"{field}[{i}].requests", c.requests, False) for i, c in enumerate(containers)]
    for path, resources, pod_level in lists:
        for name in resources:
            if not _resource_ok(name, pod_level=pod_level):
                allowed = (
                    "cpu, memory, hugepages-<size>"
                    if pod_level
                    else ("cpu, memory, ephemeral-storage, hugepages-<size> or <domain>/<name>")
                )
                return f"{path}[{name[:80]!r}]: not a resource name the API accepts ({allowed})"
    return None
