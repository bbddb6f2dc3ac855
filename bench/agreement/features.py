"""What a scenario may use: the features the generators know, and which are on by default.

A feature is on by default once both schedulers support it on ``main`` (all of them now);
one can be left out (``--features -storage``) to see what it alone changes. ``--features`` takes a
comma-separated list: plain names replace the default set, ``+name`` / ``-name`` edit it
(``-storage`` also drops ``csi-limits``, which needs it).
"""

from __future__ import annotations

from collections.abc import Iterable

#: Every feature, with what it generates.
FEATURES: dict[str, str] = {
    "resources": "cpu/memory requests of one or two containers; some pods too big to fit",
    "init-containers": "init containers (and restartable sidecars) in the pod's request",
    "extended": "an extended resource (example.com/gpu) on some nodes and pods",
    "pod-count": "nodes that hold only a few pods (Too many pods)",
    "node-selector": "nodeSelector on zone, disk type, hostname, or a label no node has",
    "node-affinity": "required node affinity: In, NotIn, Exists, DoesNotExist, Gt, Lt, "
    "matchFields metadata.name, several terms; preferred terms (scores only)",
    "taints": "NoSchedule, NoExecute and PreferNoSchedule taints; tolerations of each form",
    "cordon": "unschedulable (cordoned) nodes, and pods tolerating that",
    "ports": "host ports (TCP/UDP, a host IP or every address)",
    "pod-affinity": "required inter-pod affinity over zone or hostname",
    "pod-anti-affinity": "required inter-pod anti-affinity over zone or hostname",
    "spread": "topology spread: DoNotSchedule/ScheduleAnyway, maxSkew, minDomains, "
    "matchLabelKeys, nodes without the topology label",
    "spread-policies": "topology spread's nodeAffinityPolicy and nodeTaintsPolicy",
    "gates": "pods created with scheduling gates, which must stay untouched until removed",
    "images": "node status.images and container images (ImageLocality: scores only)",
    "namespaces": "labelled namespaces; affinity terms with a namespaceSelector",
    "storage": "StorageClasses, PVs pre-bound to claims by node or zone, ReadWriteOncePod, "
    "unbound Immediate claims, a missing class or claim",
    "csi-limits": "CSINode attach limits and pods with CSI volumes (with storage)",
    "devices": "DRA: DeviceClasses, ResourceSlices of GPUs on some nodes and a network-attached "
    "pool, pods with a ResourceClaim (counts 1-4, CEL selectors, matchAttribute, a shared "
    "claim, a missing class)",
}

#: On unless switched off: what both schedulers support on main today.
DEFAULT_FEATURES: frozenset[str] = frozenset(
    {
        "resources",
        "init-containers",
        "extended",
        "pod-count",
        "node-selector",
        "node-affinity",
        "taints",
        "cordon",
        "ports",
        "pod-affinity",
        "pod-anti-affinity",
        "spread",
        "spread-policies",
        "images",
        "gates",
        "namespaces",
        "storage",
        "csi-limits",
    }
)

#: Features that need another one.
REQUIRES: dict[str, str] = {"csi-limits": "storage"}


def parse(text: str | None) -> frozenset[str]:
    """The feature set ``--features`` names (see the module docstring); ValueError for an
    unknown name or a missing requirement."""
    chosen = set(DEFAULT_FEATURES)
    parts = [p.strip() for p in (text or "").split(",") if p.strip()]
    if parts and not all(p[0] in "+-" for p in parts):
        chosen = set()
    for part in parts:
        name = part.lstrip("+-")
        if name == "all":
            chosen = set() if part[0] == "-" else chosen | set(FEATURES)
            continue
        if name not in FEATURES:
            raise ValueError(f"unknown feature {name!r}: {', '.join(FEATURES)} (or all)")
        if part.startswith("-"):
            chosen -= {name, *(f for f, needs in REQUIRES.items() if needs == name)}
        else:
            chosen.add(name)
    check(chosen)
    return frozenset(chosen)


def check(features: Iterable[str]) -> None:
    """ValueError if a chosen feature lacks one it needs."""
    chosen = set(features)
    for name, needs in REQUIRES.items():
        if name in chosen and needs not in chosen:
            raise ValueError(f"feature {name!r} needs {needs!r}")
