"""The scheduler cache: which pods occupy which nodes, as the scheduler believes right now.

Owns the `NodeTable` that filter and score plugins read, and keeps it in step with node
events, pod events from the watch, and the scheduler's own assumptions. Called by the
scheduler service (watch events, the binder's outcomes) and by the algorithm, which reads
`.table`, assumes, and is the only caller of `forget` (`FrameworkAlgorithm.forget` runs the
Reserve plugins' Unreserve first, so no plugin's reservation outlives its assumption).

Pod states follow kube-scheduler's cache (pkg/scheduler/backend/cache): a pod is *Assumed*
when the scheduler has picked a node and not yet seen the binding through the watch, and
*Added* once the watch shows it assigned. Initial, Forgotten and Deleted pods are simply not
in the cache. Unlike old kube-scheduler there is no TTL: an assumed pod leaves the Assumed
state only through the watch (`add_pod`), `forget` or `remove_pod`, never through a timer,
because expiring an assumption whose bind then lands late double-books the node.

Pods whose node is not in the table (not yet seen, or deleted while the pods still exist)
are kept aside per node name and counted as soon as the node (re)appears.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from splitsched.core import models
from splitsched.core.clock import Clock, SystemClock
from splitsched.core.nodetable import COL_PODS, NodeTable


class CacheError(Exception):
    """An event that the pod's current state does not allow (nothing was changed)."""


class PodState(enum.Enum):
    ASSUMED = "Assumed"
    ADDED = "Added"


@dataclass(frozen=True, slots=True)
class CachedPod:
    """A pod as the cache holds it. `pod.node_name` equals `node_name`."""

    pod: models.Pod
    state: PodState
    node_name: str
    assumed_at: float | None = None  # clock time of `assume`; None if never assumed
    binding_finished: float | None = None  # clock time of `finish_binding`

    @property
    def uid(self) -> str:
        return self.pod.uid


class SchedulerCache:
    """Pod states plus the node table they are counted in. Every mutation either succeeds
    completely or raises `CacheError` before touching anything."""

    def __init__(self, *, table: NodeTable | None = None, clock: Clock | None = None) -> None:
        self.table = table if table is not None else NodeTable()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._pods: dict[str, CachedPod] = {}
        # Pods on nodes that are not in the table, by node name then uid.
        self._aside: dict[str, dict[str, models.Pod]] = {}
        # A table handed in with pods already counted: adopt them as Added.
        for row_pods in self.table.pods:
            for uid, pod in row_pods.items():
                self._pods[uid] = CachedPod(pod=pod, state=PodState.ADDED, node_name=pod.node_name)

    # ---- counting ----------------------------------------------------------------------
    def _count(self, pod: models.Pod) -> None:
        if not self.table.add_pod(pod.node_name, pod):
            self._aside.setdefault(pod.node_name, {})[pod.uid] = pod

    def _uncount(self, cached: CachedPod) -> None:
        if cached.node_name in self.table.row_of:
            self.table.remove_pod(cached.node_name, cached.uid)
            return
        aside = self._aside.get(cached.node_name)
        if aside is not None:
            aside.pop(cached.uid, None)
            if not aside:
                del self._aside[cached.node_name]

    # ---- nodes -------------------------------------------------------------------------
    def add_node(self, node: models.Node) -> None:
        """Add a node, or replace its spec if it is already known (as kube-scheduler's
        AddNode does). Pods seen on it before it appeared are counted now."""
        if node.name in self.table.row_of:
            self.table.set_node(node)
            return
        waiting = self._aside.pop(node.name, {})
        self.table.set_node(node, waiting.values())

    def update_node(self, node: models.Node) -> None:
        """Replace a node's spec; an update for a node never seen adds it."""
        self.add_node(node)

    def remove_node(self, name: str) -> None:
        """Drop a node's row. Its pods stay in the cache (they still exist in the API until
        the pod GC deletes them) and are counted again if the node comes back."""
        if name not in self.table.row_of:
            raise CacheError(f"node {name} is not in the cache, so it cannot be removed")
        pods = self.table.remove_node(name)
        if pods:
            self._aside[name] = {p.uid: p for p in pods}

    # ---- disruption budgets (read by preemption) -------------------------------------------
    def set_pdb(self, pdb: models.PodDisruptionBudget) -> None:
        self.table.pdbs[(pdb.namespace, pdb.name)] = pdb

    def remove_pdb(self, namespace: str, name: str) -> None:
        self.table.pdbs.pop((namespace, name), None)

    # ---- namespaces (read by InterPodAffinity's namespaceSelector) ---------------------------
    def set_namespace(self, namespace: models.Namespace) -> bool:
        """Add or update a namespace; whether its labels are new (a selector may now match
        differently)."""
        old = self.table.namespace_labels.get(namespace.name)
        self.table.namespace_labels[namespace.name] = namespace.labels
        return old is None or old != namespace.labels

    def remove_namespace(self, name: str) -> bool:
        """Whether the namespace was known."""
        return self.table.namespace_labels.pop(name, None) is not None

    def node_names(self) -> list[str]:
        return list(self.table.names)

    # ---- pods: the scheduler's side ------------------------------------------------------
    def assume(self, pod: models.Pod, node_name: str) -> CachedPod:
        """Count the pod on the node the scheduler chose, before the bind happens, so the
        next scheduling cycle sees the node as occupied."""
        if not node_name:
            raise CacheError(f"pod {pod.key} ({pod.uid}) cannot be assumed on an empty node name")
        current = self._pods.get(pod.uid)
        if current is not None:
            raise CacheError(
                f"pod {pod.key} ({pod.uid}) is in the cache ({current.state.value} on "
                f"{current.node_name}), so it cannot be assumed"
            )
        if pod.node_name != node_name:
            pod = dataclasses.replace(pod, node_name=node_name)
        cached = CachedPod(
            pod=pod, state=PodState.ASSUMED, node_name=node_name, assumed_at=self._clock.now()
        )
        self._count(pod)
        self._pods[pod.uid] = cached
        return cached

    def finish_binding(self, uid: str) -> bool:
        """Record that the bind for an assumed pod completed. The pod stays Assumed until the
        watch confirms it. Returns False (and changes nothing) when the pod is not Assumed:
        the watch may already have confirmed it, or seen it deleted, which is a normal race
        between the binder's report and the watch (kube-scheduler ignores it too)."""
        cached = self._pods.get(uid)
        if cached is None or cached.state is not PodState.ASSUMED:
            return False
        self._pods[uid] = dataclasses.replace(cached, binding_finished=self._clock.now())
        return True

    def forget(self, uid: str) -> bool:
        """Undo `assume` (the bind failed or a permit plugin rejected). A pod already gone
        from the cache is fine (returns False, as kube-scheduler's ForgetPod); a pod the watch
        has confirmed cannot be forgotten. Call it through `FrameworkAlgorithm.forget`,
        which unreserves first."""
        cached = self._pods.get(uid)
        if cached is None:
            return False
        if cached.state is not PodState.ASSUMED:
            raise CacheError(
                f"pod {cached.pod.key} ({uid}) is {cached.state.value} on {cached.node_name}, "
                "not assumed, so it cannot be forgotten"
            )
        self._uncount(cached)
        del self._pods[uid]
        return True

    # ---- pods: the watch's side ----------------------------------------------------------
    def add_pod(self, pod: models.Pod) -> CachedPod:
        """An assigned pod seen by the watch. Confirms an assumed pod (moving its counts if it
        landed on another node than assumed), adds a pod bound by someone else, and treats a
        repeated add of an Added pod as an update."""
        if not pod.node_name:
            raise CacheError(f"pod {pod.key} ({pod.uid}) has no node, so it cannot be added")
        current = self._pods.get(pod.uid)
        if current is not None and current.state is PodState.ADDED:
            return self.update_pod(pod)
        if current is not None:
            self._uncount(current)
        self._count(pod)
        cached = CachedPod(
            pod=pod,
            state=PodState.ADDED,
            node_name=pod.node_name,
            assumed_at=current.assumed_at if current is not None else None,
            binding_finished=current.binding_finished if current is not None else None,
        )
        self._pods[pod.uid] = cached
        return cached

    def update_pod(self, pod: models.Pod) -> CachedPod:
        """A watched change to an Added pod: its requests (in-place resize) or, should it
        ever happen, its node. An Assumed pod must be confirmed by `add_pod` first, as in
        kube-scheduler, where an assumed pod gets no update before its add."""
        current = self._pods.get(pod.uid)
        if current is None:
            raise CacheError(
                f"pod {pod.key} ({pod.uid}) is not in the cache, so it cannot be updated"
            )
        if current.state is not PodState.ADDED:
            raise CacheError(
                f"pod {pod.key} ({pod.uid}) is assumed on {current.node_name}; it must be "
                "added (confirmed by the watch) before it can be updated"
            )
        if not pod.node_name:
            raise CacheError(
                f"pod {pod.key} ({pod.uid}) lost its node name in an update, which the API "
                "never allows"
            )
        self._uncount(current)
        self._count(pod)
        cached = dataclasses.replace(current, pod=pod, node_name=pod.node_name)
        self._pods[pod.uid] = cached
        return cached

    def remove_pod(self, uid: str) -> CachedPod:
        """The pod was deleted (or became terminal): free what it held on its node."""
        current = self._pods.get(uid)
        if current is None:
            raise CacheError(f"pod {uid} is not in the cache, so it cannot be removed")
        self._uncount(current)
        del self._pods[uid]
        return current

    # ---- queries -------------------------------------------------------------------------
    def get(self, uid: str) -> CachedPod | None:
        return self._pods.get(uid)

    def is_assumed(self, uid: str) -> bool:
        cached = self._pods.get(uid)
        return cached is not None and cached.state is PodState.ASSUMED

    def pod_count(self) -> int:
        """Assumed and Added pods, including those on nodes not in the table."""
        return len(self._pods)

    def pods_on(self, node_name: str) -> list[models.Pod]:
        """The pods the cache places on a node, whether or not the node is in the table."""
        row = self.table.row_of.get(node_name)
        if row is not None:
            return list(self.table.pods[row].values())
        return list(self._aside.get(node_name, {}).values())

    def assumed_pods(self) -> list[CachedPod]:
        """Assumed pods, oldest assumption first, so the service can check the stale ones
        against the watch (there is no timer that expires them)."""
        out = [c for c in self._pods.values() if c.state is PodState.ASSUMED]
        out.sort(key=lambda c: (c.assumed_at if c.assumed_at is not None else 0.0, c.uid))
        return out

    def __iter__(self) -> Iterator[CachedPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    # ---- self-check ----------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Recompute every node's usage from the pod states and compare with the table.
        Raises `CacheError` describing the first mismatch. O(pods): for tests and debug
        endpoints, not the hot path."""
        table = self.table
        expected = np.zeros((table.n, len(table.resource_names)), dtype=np.int64)
        expected_nonzero = np.zeros((table.n, 2), dtype=np.int64)
        expected_uids: list[set[str]] = [set() for _ in range(table.n)]
        expected_aside: dict[str, set[str]] = {}
        for uid, cached in self._pods.items():
            if cached.pod.uid != uid or cached.pod.node_name != cached.node_name:
                raise CacheError(f"pod {uid} is stored inconsistently: {cached}")
            row = table.row_of.get(cached.node_name)
            if row is None:
                expected_aside.setdefault(cached.node_name, set()).add(uid)
                continue
            for name, amount in models.effective_requests(cached.pod).items():
                col = table.resource_col.get(name)
                if col is None:
                    if amount:
                        raise CacheError(f"pod {uid} requests {name}, which has no column")
                    continue
                expected[row, col] += amount
            expected[row, COL_PODS] += 1
            nonzero = models.effective_requests(cached.pod, nonzero_defaults=True)
            expected_nonzero[row, 0] += nonzero.get(models.CPU, 0)
            expected_nonzero[row, 1] += nonzero.get(models.MEMORY, 0)
            expected_uids[row].add(uid)
        for row, name in enumerate(table.names):
            if set(table.pods[row]) != expected_uids[row]:
                raise CacheError(
                    f"node {name} counts pods {sorted(table.pods[row])}, the cache places "
                    f"{sorted(expected_uids[row])} there"
                )
            if not np.array_equal(table.requested[row], expected[row]):
                got = dict(zip(table.resource_names, table.requested[row].tolist(), strict=True))
                want = dict(zip(table.resource_names, expected[row].tolist(), strict=True))
                raise CacheError(f"node {name} has requested {got}, its pods sum to {want}")
            if not np.array_equal(table.nonzero_requested[row], expected_nonzero[row]):
                raise CacheError(
                    f"node {name} has non-zero requested {table.nonzero_requested[row]}, "
                    f"its pods sum to {expected_nonzero[row]}"
                )
        aside = {node: set(pods) for node, pods in self._aside.items()}
        if aside != expected_aside:
            raise CacheError(f"pods kept aside {aside} differ from expected {expected_aside}")
        for node in aside:
            if node in table.row_of:
                raise CacheError(f"pods of node {node} are kept aside but the node is present")
