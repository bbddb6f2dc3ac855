"""A random workload from a seed: pods built from every feature switched on. Pure.

``pods(rng, count, node_count, features)`` returns pod manifests in the order they are
created, one at a time. Each pod draws each feature independently, so a pod may combine
several (a spread constraint, a toleration and a host port). Some pods are meant not to
fit (too big, a selector no node matches, a host port already taken), so that messages
are compared too. Labels come from a small vocabulary (``app``, ``team``), so affinity
terms and spread constraints find the pods placed before them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence, Set
from typing import Any

from bench.agreement import cluster
from splitsched.testing.manifests import PAUSE_IMAGE

Manifest = dict[str, Any]

APPS = ("web", "db", "cache")
TEAMS = ("x", "y")
PROBE_LABEL = "agreement.splitsched.io/probe"  # on no node: a probe pod fits nowhere
ENV_LABEL = "example.com/env"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
SHORT_IMAGES = {
    "docker.io/library/nginx:1.27": "nginx:1.27",
    "docker.io/library/redis:latest": "redis",
}
#: With the namespaces feature: three namespaces, two of them labelled alike.
NAMESPACES: dict[str, dict[str, str]] = {
    "@ns0": {ENV_LABEL: "prod"},
    "@ns1": {ENV_LABEL: "prod"},
    "@ns2": {ENV_LABEL: "dev"},
}

TOLERATIONS: tuple[Manifest, ...] = (
    {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": "dedicated", "operator": "Equal", "value": "gpu"},
    {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"},
    {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
    {"operator": "Exists"},
    {"key": cluster.UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"},
)


def local_name(index: int) -> str:
    return f"p{index:02d}"


def namespaces(features: Set[str]) -> dict[str, dict[str, str]]:
    """Namespace slot -> labels: one unlabelled namespace unless ``namespaces`` is on."""
    return dict(NAMESPACES) if "namespaces" in features else {"@ns0": {}}


def pods(rng: random.Random, count: int, node_count: int, features: Set[str]) -> list[Manifest]:
    """``count`` pod manifests in namespace slots (no schedulerName: the run sets it)."""
    return [_pod(rng, i, node_count, features) for i in range(count)]


def _pod(rng: random.Random, index: int, node_count: int, features: Set[str]) -> Manifest:
    labels = {"app": rng.choice(APPS)}
    if rng.random() < 0.5:
        labels["team"] = rng.choice(TEAMS)
    spec: Manifest = {
        "containers": _containers(rng, features),
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
    }
    if "init-containers" in features and rng.random() < 0.2:
        spec["initContainers"] = _init_containers(rng)
    if "node-selector" in features and rng.random() < 0.15:
        spec["nodeSelector"] = _node_selector(rng, node_count)
    affinity = _affinity(rng, labels, node_count, features)
    if affinity:
        spec["affinity"] = affinity
    if ("taints" in features or "cordon" in features) and rng.random() < 0.35:
        pool = [
            t
            for t in TOLERATIONS
            if "cordon" in features or t.get("key") != cluster.UNSCHEDULABLE_TAINT
        ]
        spec["tolerations"] = rng.sample(pool, k=rng.choice((1, 1, 2)))
    if "spread" in features and rng.random() < 0.25:
        spec["topologySpreadConstraints"] = _spread(rng, labels, features)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": local_name(index), "namespace": "@ns0", "labels": labels},
        "spec": spec,
    }


def spread_namespaces(rng: random.Random, pods: Sequence[Manifest], features: Set[str]) -> None:
    """With ``namespaces``: each pod in one of three namespaces, and half the required pod
    (anti-)affinity terms across namespaces chosen by label ({} is every namespace). Its
    own random stream, so the pods are otherwise as without it."""
    if "namespaces" not in features:
        return
    selectors: tuple[Manifest, ...] = (
        {},
        {"matchLabels": {ENV_LABEL: "prod"}},
        {"matchLabels": {ENV_LABEL: "dev"}},
    )
    for pod in pods:
        pod["metadata"]["namespace"] = rng.choice(sorted(NAMESPACES))
        affinity = pod["spec"].get("affinity") or {}
        for kind in ("podAffinity", "podAntiAffinity"):
            for term in (affinity.get(kind) or {}).get(_REQUIRED, []):
                if rng.random() < 0.5:
                    term["namespaceSelector"] = rng.choice(selectors)


def gate(rng: random.Random, pods: Sequence[Manifest], features: Set[str]) -> None:
    """With ``gates``: one pod in ten is created with a scheduling gate (its own random
    stream, so the rest of the scenario is the same with or without)."""
    if "gates" not in features:
        return
    for pod in pods:
        if rng.random() < 0.1:
            pod["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]


def _requests(rng: random.Random, features: Set[str], *, big: float) -> dict[str, str]:
    requests: dict[str, str] = {}
    if "resources" not in features:
        return requests
    if rng.random() < big:
        requests["cpu"] = rng.choice(("6", "12"))
    elif rng.random() < 0.85:
        requests["cpu"] = rng.choice(("50m", "250m", "500m", "1", "1500m"))
    if rng.random() < big:
        requests["memory"] = rng.choice(("12Gi", "32Gi"))
    elif rng.random() < 0.8:
        requests["memory"] = rng.choice(("64Mi", "512Mi", "1Gi", "3Gi"))
    return requests


def _container(name: str, requests: dict[str, str], image: str) -> Manifest:
    container: Manifest = {"name": name, "image": image}
    limits = {k: v for k, v in requests.items() if k not in ("cpu", "memory")}
    if requests:
        container["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    return container


def _image(rng: random.Random, features: Set[str]) -> str:
    if "images" in features and rng.random() < 0.6:
        full = rng.choice(cluster.IMAGES)[0]
        # The short forms kube normalises: "nginx:1.27", "redis" (docker.io/library, :latest).
        short = {
            "docker.io/library/nginx:1.27": "nginx:1.27",
            "docker.io/library/redis:latest": "redis",
        }
        return short.get(full, full) if rng.random() < 0.5 else full
    return PAUSE_IMAGE


def _containers(rng: random.Random, features: Set[str]) -> list[Manifest]:
    out = []
    for c in range(rng.choice((1, 1, 1, 2))):
        requests = _requests(rng, features, big=0.06)
        if "extended" in features and c == 0 and rng.random() < 0.15:
            requests[cluster.GPU] = rng.choice(("1", "2"))
        out.append(_container(f"c{c}", requests, _image(rng, features)))
    if "ports" in features and rng.random() < 0.15:
        port: Manifest = {"containerPort": 80, "hostPort": rng.choice((8080, 9090))}
        port["protocol"] = rng.choice(("TCP", "TCP", "UDP"))
        if rng.random() < 0.3:
            port["hostIP"] = "127.0.0.1"
        out[0]["ports"] = [port]
    return out


def _init_containers(rng: random.Random) -> list[Manifest]:
    """One init container; sometimes a restartable sidecar, whose request adds up."""
    init = _container("init", _requests(rng, {"resources"}, big=0.03), PAUSE_IMAGE)
    if rng.random() < 0.4:
        init["restartPolicy"] = "Always"
    return [init]


def _node_selector(rng: random.Random, node_count: int) -> dict[str, str]:
    return rng.choice(
        (
            {cluster.ZONE_LABEL: rng.choice(cluster.ZONES)},
            {cluster.DISK_LABEL: "ssd"},
            {cluster.HOSTNAME_LABEL: "@" + cluster.local_name(rng.randrange(node_count))},
            {PROBE_LABEL: "nowhere"},
        )
    )


def _affinity(
    rng: random.Random, labels: dict[str, str], node_count: int, features: Set[str]
) -> Manifest:
    affinity: Manifest = {}
    if "node-affinity" in features:
        node_affinity: Manifest = {}
        if rng.random() < 0.2:
            terms = [_node_term(rng, node_count) for _ in range(rng.choice((1, 1, 2)))]
            node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": terms
            }
        if rng.random() < 0.15:
            node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "preference": _node_term(rng, node_count)}
            ]
        if node_affinity:
            affinity["nodeAffinity"] = node_affinity
    for kind, feature, chance in (
        ("podAffinity", "pod-affinity", 0.12),
        ("podAntiAffinity", "pod-anti-affinity", 0.2),
    ):
        if feature in features and rng.random() < chance:
            term = _pod_term(rng)
            affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return affinity


def _node_term(rng: random.Random, node_count: int) -> Manifest:
    """One nodeSelectorTerm: one or two expressions, or (rarely) a metadata.name field (the
    API allows one value there)."""
    if rng.random() < 0.1:
        name = "@" + cluster.local_name(rng.randrange(node_count))
        op = rng.choice(("In", "In", "NotIn"))
        return {"matchFields": [{"key": "metadata.name", "operator": op, "values": [name]}]}
    count = rng.choice((1, 1, 2))
    return {"matchExpressions": [_node_expression(rng) for _ in range(count)]}


def _node_expression(rng: random.Random) -> Manifest:
    kind = rng.randrange(4)
    if kind == 0:
        zones = sorted(rng.sample(cluster.ZONES, 2))
        return {"key": cluster.ZONE_LABEL, "operator": "In", "values": zones}
    if kind == 1:
        zones = [rng.choice(cluster.ZONES)]
        return {"key": cluster.ZONE_LABEL, "operator": "NotIn", "values": zones}
    if kind == 2:
        return {"key": cluster.DISK_LABEL, "operator": rng.choice(("Exists", "DoesNotExist"))}
    rank = [str(rng.randint(1, 5))]
    return {"key": cluster.RANK_LABEL, "operator": rng.choice(("Gt", "Lt")), "values": rank}


def _pod_term(rng: random.Random) -> Manifest:
    """A required pod (anti-)affinity term (over the pod's own namespace)."""
    selector: Manifest = {"matchLabels": {"app": rng.choice(APPS)}}
    if rng.random() < 0.3:
        op = rng.choice(("In", "NotIn"))
        selector = {"matchExpressions": [{"key": "team", "operator": op, "values": ["x"]}]}
    key = rng.choice((cluster.HOSTNAME_LABEL, cluster.HOSTNAME_LABEL, cluster.ZONE_LABEL))
    return {"labelSelector": selector, "topologyKey": key}


def _spread(rng: random.Random, labels: dict[str, str], features: Set[str]) -> list[Manifest]:
    out = []
    keys = rng.sample((cluster.ZONE_LABEL, cluster.HOSTNAME_LABEL), k=rng.choice((1, 1, 2)))
    for key in keys:
        hard = rng.random() < 0.75
        constraint: Manifest = {
            "maxSkew": rng.choice((1, 1, 2)),
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": labels["app"]}},
        }
        if hard and rng.random() < 0.2:
            constraint["minDomains"] = rng.randint(2, 4)
        if "team" in labels and rng.random() < 0.2:
            constraint["matchLabelKeys"] = ["team"]
        if "spread-policies" in features and rng.random() < 0.3:
            constraint["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
        if "spread-policies" in features and rng.random() < 0.3:
            constraint["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
        out.append(constraint)
    return out
