"""The Kubernetes rights each component needs, and nothing more: RBAC PolicyRules.

The source of truth for the Helm chart's ClusterRoles (tests/integration/test_helm.py
checks they are equal), the test stack's ServiceAccounts (`splitsched.testing.stack`) and
the permission check of `splitsched up` (`splitsched.up.access`). The scheduler needs no
rights at all, except its Lease under leader election.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

WATCHER_RULES: tuple[Mapping[str, Any], ...] = (
    {
        "apiGroups": [""],
        "resources": ["nodes", "pods", "namespaces"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["policy"],
        "resources": ["poddisruptionbudgets"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": [""],
        "resources": ["persistentvolumeclaims", "persistentvolumes"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["storage.k8s.io"],
        "resources": ["storageclasses", "csinodes"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["deviceclasses", "resourceslices", "resourceclaims"],
        "verbs": ["get", "list", "watch"],
    },
)
BINDER_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    # The volume step before a Binding: a PV's claimRef, a claim's selected-node.
    {
        "apiGroups": [""],
        "resources": ["persistentvolumes", "persistentvolumeclaims"],
        "verbs": ["get", "patch"],
    },
    # The device step before a Binding: a ResourceClaim's finalizer (update), its
    # allocation and reservedFor (update of the status), the undo (patch of the status).
    # kube-apiserver 1.36 also checks the status write's verb on the synthetic
    # resourceclaims/binding when it changes allocation or reservedFor.
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "update"]},
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaims/status"],
        "verbs": ["update", "patch"],
    },
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaims/binding"],
        "verbs": ["update", "patch"],
    },
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
)
# Leader election only (`--leader-elect`): the scheduler reads and writes its Lease and
# touches nothing else in the API.
SCHEDULER_RULES: tuple[Mapping[str, Any], ...] = (
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    },
)
