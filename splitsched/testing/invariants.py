"""The two promises, checked from the API server's objects (never from our own logs):
no node holds more than its allocatable, and every placement satisfies its pod's
constraints. Used by the e2e, fault and benchmark runs.

The constraint checks are written independently of the core's plugins (plain per-pod
loops over the API's JSON), so a bug in a plugin cannot hide itself here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from kubernetes import client

from splitsched.core import convert, models

Json = dict[str, Any]


def list_json(api: client.ApiClient, path: str) -> list[Json]:
    """GET a list endpoint and return its items as plain dicts."""
    resp = api.call_api(
        path,
        "GET",
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    items: list[Json] = orjson.loads(resp.data)["items"]
    return items


def usage_by_node(pods: Iterable[models.Pod]) -> dict[str, Counter[str]]:
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in pods:
        if not pod.node_name or pod.is_terminal:
            continue
        used[pod.node_name].update(pod.requests)
        used[pod.node_name][models.PODS] += 1
    return used


def overcommitted(nodes: Iterable[models.Node], pods: Iterable[models.Pod]) -> list[str]:
    """One line per node and resource where the bound pods ask for more than allocatable."""
    used = usage_by_node(pods)
    out = []
    for node in nodes:
        for resource, amount in used.get(node.name, Counter()).items():
            if amount > node.allocatable.get(resource, 0):
                out.append(
                    f"{node.name}: {resource} requested {amount} > allocatable "
                    f"{node.allocatable.get(resource, 0)}"
                )
    return out


def _tolerated(pod: models.Pod, taint: models.Taint) -> bool:
    return any(t.tolerates(taint) for t in pod.tolerations)


def _selector_matches(selector: models.LabelSelector | None, labels: Mapping[str, str]) -> bool:
    return selector is not None and selector.matches(labels)


def placement_violations(nodes: Iterable[models.Node], pods: Iterable[models.Pod]) -> list[str]:
    """nodeSelector, NoSchedule/NoExecute taints, cordons at bind time are not checkable
    after the fact, so: selectors, taints, hostname anti-affinity among the given pods, and
    DoNotSchedule spread skew among the given pods. Linear in pods and nodes for a
    workload's repeated terms (a 5,000-node, 15,000-pod spread run took minutes when each
    pod's constraint was counted over every pod)."""
    by_name = {n.name: n for n in nodes}
    placed = [p for p in pods if p.node_name and p.node_name in by_name and not p.is_terminal]
    out = [*_node_violations(by_name, placed), *_anti_affinity_violations(placed)]
    # Terminating pods neither count nor are judged, as in kube-scheduler's
    # PodTopologySpread: a namespace half deleted by the bench's clean-up is not skewed.
    out += _spread_violations(by_name, [p for p in placed if not p.deleting])
    return sorted(set(out))


def _node_violations(by_name: Mapping[str, models.Node], placed: list[models.Pod]) -> list[str]:
    """Each pod against its own node: nodeSelector and untolerated taints."""
    out: list[str] = []
    for pod in placed:
        node = by_name[pod.node_name]
        for key, value in pod.node_selector.items():
            if node.labels.get(key) != value:
                out.append(f"{pod.key} on {node.name}: nodeSelector {key}={value} not met")
        for taint in node.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not _tolerated(pod, taint):
                out.append(f"{pod.key} on {node.name}: untolerated taint {taint.key}")
    return out


def _anti_affinity_violations(placed: list[models.Pod]) -> list[str]:
    """Required hostname anti-affinity: no matching pod of the namespace on the same node."""
    neighbours: dict[tuple[str, str], list[models.Pod]] = defaultdict(list)
    for pod in placed:
        neighbours[(pod.node_name, pod.namespace)].append(pod)
    out: list[str] = []
    for pod in placed:
        for term in pod.pod_anti_affinity.required if pod.pod_anti_affinity else ():
            if term.topology_key != "kubernetes.io/hostname":
                continue
            for other in neighbours[(pod.node_name, pod.namespace)]:
                if other.uid != pod.uid and _selector_matches(term.label_selector, other.labels):
                    out.append(f"{pod.key} and {other.key} share {pod.node_name} (anti-affinity)")
    return out


def _spread_violations(by_name: Mapping[str, models.Node], placed: list[models.Pod]) -> list[str]:
    """DoNotSchedule skew over every domain of the topology key, among the matching pods of
    the namespace. Pods of one workload share their constraint: its skew is counted once."""
    skews: dict[tuple[str, str, models.LabelSelector | None], int | None] = {}
    out: list[str] = []
    for pod in placed:
        for c in pod.topology_spread_constraints:
            if c.when_unsatisfiable != "DoNotSchedule":
                continue
            key = (pod.namespace, c.topology_key, c.label_selector)
            if key not in skews:
                skews[key] = _skew(by_name, placed, pod.namespace, c)
            skew = skews[key]
            if skew is not None and skew > c.max_skew:
                out.append(
                    f"{pod.key}: spread over {c.topology_key} has skew {skew} > {c.max_skew}"
                )
    return out


def _skew(
    by_name: Mapping[str, models.Node],
    placed: list[models.Pod],
    namespace: str,
    constraint: models.TopologySpreadConstraint,
) -> int | None:
    """Max minus min matching pods over the key's domains; None when no node has the key."""
    tkey = constraint.topology_key
    domains = {n.labels[tkey] for n in by_name.values() if tkey in n.labels}
    if not domains:
        return None
    counts = Counter(
        by_name[o.node_name].labels.get(tkey)
        for o in placed
        if o.namespace == namespace and _selector_matches(constraint.label_selector, o.labels)
    )
    return max(counts.get(d, 0) for d in domains) - min(counts.get(d, 0) for d in domains)


def cluster_state(api: client.ApiClient) -> tuple[list[models.Node], list[models.Pod]]:
    nodes = [convert.node_from_k8s(o) for o in list_json(api, "/api/v1/nodes")]
    pods = [convert.pod_from_k8s(o, strict=False) for o in list_json(api, "/api/v1/pods")]
    return nodes, pods


def partial_gangs(pods: Iterable[models.Pod]) -> list[str]:
    """Gangs (pods sharing a group) with some members bound but fewer than minMember: a
    gang is placed all or nothing, so a partly bound one holds room it cannot use."""
    bound: Counter[tuple[str, str]] = Counter()
    need: dict[tuple[str, str], int] = {}
    for pod in pods:
        if pod.group is None or pod.is_terminal:
            continue
        key = (pod.namespace, pod.group.name)
        need[key] = max(need.get(key, 0), pod.group.min_member)
        bound[key] += bool(pod.node_name)
    return [
        f"gang {ns}/{name}: {bound[(ns, name)]} bound < minMember {n}"
        for (ns, name), n in sorted(need.items())
        if 0 < bound[(ns, name)] < n
    ]


def scheduled_more_than_once(events: Iterable[Json]) -> list[str]:
    """Pods (by uid) with more than one ``Scheduled`` event (events.k8s.io/v1 objects):
    each would be a second decision the binders carried out for one pod."""
    count: Counter[str] = Counter()
    names: dict[str, str] = {}
    for e in events:
        if e.get("reason") == "Scheduled":
            regarding = e.get("regarding") or {}
            uid = str(regarding.get("uid", ""))
            count[uid] += 1
            names[uid] = f"{regarding.get('namespace')}/{regarding.get('name')}"
    return [f"{names[uid]} ({uid}): {n} Scheduled events" for uid, n in count.items() if n > 1]
