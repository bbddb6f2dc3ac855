"""Kubernetes API JSON (camelCase dicts) -> `models.Node` / `models.Pod`, and cluster files.

Called by the watcher once per list item and watch event (`node_from_k8s`, `pod_from_k8s`
with strict=False), and by tools and tests that load a cluster from what
`kubectl get nodes,pods -A -o yaml` prints (`load_cluster`).

Hot path: thousands of events per second, so it reads only the fields scheduling needs,
makes no deep copies (label, annotation and nodeSelector maps of the input are kept by
reference: callers must not mutate the input afterwards), builds models through `fast`'s
constructors and parses quantities through `quantity.canonical_amount`'s cache.
Kubernetes' defaulting that scheduling depends on is mirrored so hand-written objects
behave like stored ones (see `podspec`).

Every error names the object and the field path:
`pod default/web: spec.containers[1].resources.requests.memory: invalid quantity '12XB'`.

The modules, by object: `fields` (typed readers, quantities, the errors), `selectors`
(label and node selectors, affinity terms), `podspec` (containers, tolerations, spread
constraints), `pods`, `nodes`, `cluster` (whole files). Import from this package; the
modules are its inside.
"""

from __future__ import annotations

from splitsched.core.convert.cluster import load_cluster, load_storage
from splitsched.core.convert.fields import ConversionError
from splitsched.core.convert.nodes import node_from_k8s
from splitsched.core.convert.pods import (
    GROUP_ANNOTATION,
    MIN_MEMBER_ANNOTATION,
    POD_GROUP_LABEL,
    POD_GROUP_MIN_MEMBER,
    pod_from_k8s,
)

__all__ = [
    "GROUP_ANNOTATION",
    "MIN_MEMBER_ANNOTATION",
    "POD_GROUP_LABEL",
    "POD_GROUP_MIN_MEMBER",
    "ConversionError",
    "load_cluster",
    "load_storage",
    "node_from_k8s",
    "pod_from_k8s",
]
