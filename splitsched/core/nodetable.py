"""The node table: every node of the cluster as rows of numpy arrays, for vectorised plugins.

The cache (`splitsched.core.cache`) owns one NodeTable and keeps it in step with every node
and pod event; filter and score plugins read it to judge all nodes at once with a few array
operations. Rows are dense (0..n-1) and may move when a node is removed, so a row number is
only valid within one scheduling cycle; names are the stable identity.

Things that change rarely (labels, taints) are indexed lazily and memoised until a node's
spec changes (`spec_version`); requested resources are updated in place per pod, and so is
the `podindex.PodIndex` the pod-topology plugins read (`pod_groups`, `affinity_terms`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from splitsched.core import models
from splitsched.core.devices.view import DeviceView
from splitsched.core.podindex import (
    AffinityTermKey,
    LabelPair,
    PodGroup,
    PodGroupKey,
    PodIndex,
)
from splitsched.core.specmemo import SpecMemo
from splitsched.core.storageview import StorageView

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# The first columns are fixed so plugins can index them without a lookup.
COL_CPU = 0
COL_MEMORY = 1
COL_EPHEMERAL = 2
COL_PODS = 3
_FIXED_RESOURCES = (models.CPU, models.MEMORY, models.EPHEMERAL_STORAGE, models.PODS)

PortKey = tuple[str, str, int]  # (protocol, host_ip, port)
RowsMark = tuple[int, int, int]  # `NodeTable.rows_mark`: rows, spec version, touch position
_NO_ROWS: IntArray = np.zeros(0, dtype=np.int64)
_M = TypeVar("_M")


def _matrix(rows: int, cols: int) -> IntArray:
    """Zeros, column-major (see `NodeTable.__init__`)."""
    return np.zeros((rows, cols), dtype=np.int64, order="F")


@dataclass(frozen=True, slots=True)
class PodVectors:
    """A pod's request as table columns: computed once per pod per table."""

    request: IntArray  # [R] including pods=1
    nonzero_cpu: int
    nonzero_memory: int
    unknown: tuple[str, ...]  # requested resources that no node has ever offered


class NodeTable:
    """Dense arrays over all nodes. Mutated only by the cache; read by plugins."""

    def __init__(
        self,
        *,
        initial_capacity: int = 64,
        storage: StorageView | None = None,
        devices: DeviceView | None = None,
    ) -> None:
        self.resource_names: list[str] = list(_FIXED_RESOURCES)
        self.resource_col: dict[str, int] = {n: i for i, n in enumerate(self.resource_names)}
        cap = max(initial_capacity, 1)
        # Column-major: plugins read a resource over every row (a contiguous column); a
        # pod's count writes one row of a few columns.
        self._allocatable = _matrix(cap, len(self.resource_names))
        self._requested = _matrix(cap, len(self.resource_names))
        self._nonzero = _matrix(cap, 2)  # cpu milli, memory: for scoring
        self._unschedulable = np.zeros(cap, dtype=np.bool_)
        self.names: list[str] = []
        self.nodes: list[models.Node] = []
        self.row_of: dict[str, int] = {}
        # Pods counted on each row, by uid. Shared with nobody: plugins only read.
        self.pods: list[dict[str, models.Pod]] = []
        self.used_ports: list[dict[PortKey, int]] = []
        self.spec_version = 0  # bumps when nodes come, go, or change labels/taints
        self.pod_version = 0  # bumps when any pod is added to or removed from a row
        # Rows whose usage or allocatable changed, in order: lets the algorithm rescore
        # only those rows for the next pod of the same shape. `touch_base` is the absolute
        # position of touch_log[0]; old entries are dropped in halves.
        self.touch_log: list[int] = []
        self.touch_base = 0
        # Cluster facts plugins read besides nodes: PodDisruptionBudgets by (ns, name), and
        # each namespace's labels by name (InterPodAffinity's namespaceSelector).
        self.pdbs: dict[tuple[str, str], models.PodDisruptionBudget] = {}
        self.namespace_labels: dict[str, Mapping[str, str]] = {}
        # ... and storage (claims, volumes, classes, CSINodes), with the pods using volumes
        # (a view handed in must hold no pods: `StorageView.rewatch`).
        self.storage = storage if storage is not None else StorageView()
        # ... and devices (Dynamic Resource Allocation's classes, slices and claims)
        self.devices = devices if devices is not None else DeviceView()
        self._vectors_memo: dict[str, tuple[object, object, object, object, int, PodVectors]] = {}
        self._specs = SpecMemo()
        self._pod_index = PodIndex()  # kept in step by add_pod/remove_pod/remove_node

    # ---- sizes and views -------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def allocatable(self) -> IntArray:
        return self._allocatable[: self.n]

    @property
    def requested(self) -> IntArray:
        return self._requested[: self.n]

    @property
    def nonzero_requested(self) -> IntArray:
        return self._nonzero[: self.n]

    @property
    def unschedulable(self) -> BoolArray:
        return self._unschedulable[: self.n]

    def column(self, resource: str) -> int | None:
        return self.resource_col.get(resource)

    # ---- mutation (cache only) -------------------------------------------------------
    def _ensure_column(self, resource: str) -> int:
        col = self.resource_col.get(resource)
        if col is not None:
            return col
        col = len(self.resource_names)
        self.resource_names.append(resource)
        self.resource_col[resource] = col
        for attr in ("_allocatable", "_requested"):
            old = getattr(self, attr)
            new = _matrix(old.shape[0], old.shape[1] + 1)
            new[:, : old.shape[1]] = old
            setattr(self, attr, new)
        return col

    def _grow(self) -> None:
        cap = self._allocatable.shape[0] * 2
        r = self._allocatable.shape[1]
        for attr, shape in (
            ("_allocatable", (cap, r)),
            ("_requested", (cap, r)),
            ("_nonzero", (cap, 2)),
        ):
            old = getattr(self, attr)
            new = _matrix(*shape)
            new[: old.shape[0]] = old
            setattr(self, attr, new)
        uns = np.zeros(cap, dtype=np.bool_)
        uns[: self._unschedulable.shape[0]] = self._unschedulable
        self._unschedulable = uns

    def _write_node(self, row: int, node: models.Node) -> None:
        for name in node.allocatable:
            self._ensure_column(name)
        self._allocatable[row, :] = 0
        for name, amount in node.allocatable.items():
            self._allocatable[row, self.resource_col[name]] = amount
        self._unschedulable[row] = node.unschedulable

    def set_node(self, node: models.Node, pods: Iterable[models.Pod] = ()) -> None:
        """Add a node, or replace its spec keeping the pods already counted on it."""
        row = self.row_of.get(node.name)
        if row is None:
            if self.n == self._allocatable.shape[0]:
                self._grow()
            row = self.n
            self.names.append(node.name)
            self.nodes.append(node)
            self.row_of[node.name] = row
            self.pods.append({})
            self.used_ports.append({})
            self._requested[row, :] = 0
            self._nonzero[row, :] = 0
            self._write_node(row, node)
            for pod in pods:
                self.add_pod(node.name, pod)
            self.spec_version += 1
            return
        old = self.nodes[row]
        self.nodes[row] = node
        self._write_node(row, node)
        self._touch(row)
        if old.labels != node.labels or old.taints != node.taints or old.images != node.images:
            self.spec_version += 1  # the memoised label, taint and image indexes are stale

    def remove_node(self, name: str) -> list[models.Pod]:
        """Remove a node's row; returns the pods that were counted on it."""
        row = self.row_of.pop(name, None)
        if row is None:
            return []
        last = self.n - 1
        pods = list(self.pods[row].values())
        for pod in pods:
            self._pod_index.count(name, pod, -1)
            if pod.volumes:
                self.storage.count_pod(name, pod, -1)
        if row != last:
            moved = self.names[last]
            self.names[row] = moved
            self.nodes[row] = self.nodes[last]
            self.pods[row] = self.pods[last]
            self.used_ports[row] = self.used_ports[last]
            self._allocatable[row] = self._allocatable[last]
            self._requested[row] = self._requested[last]
            self._nonzero[row] = self._nonzero[last]
            self._unschedulable[row] = self._unschedulable[last]
            self.row_of[moved] = row
        self.names.pop()
        self.nodes.pop()
        self.pods.pop()
        self.used_ports.pop()
        self._allocatable[last] = 0
        self._requested[last] = 0
        self._nonzero[last] = 0
        self._unschedulable[last] = False
        self.spec_version += 1
        self.pod_version += 1
        return pods

    def _touch(self, row: int) -> None:
        log = self.touch_log
        log.append(row)
        if len(log) > 200_000:
            drop = len(log) // 2
            del log[:drop]
            self.touch_base += drop

    @property
    def touch_mark(self) -> int:
        return self.touch_base + len(self.touch_log)

    def touched_since(self, mark: int) -> IntArray | None:
        """Distinct rows touched since `mark` (a former `touch_mark`), sorted, or None when
        that part of the log was dropped."""
        if mark < self.touch_base:
            return None
        tail = self.touch_log[mark - self.touch_base :]
        if len(tail) < 256:  # the usual few rows: np.unique's own cost would dominate
            return np.fromiter(sorted(set(tail)), dtype=np.int64) if tail else _NO_ROWS
        return np.unique(np.asarray(tail, dtype=np.int64))

    def rows_mark(self) -> RowsMark:
        """Where the rows stand now, for `stale_rows`: a memo of values per row keeps it."""
        return (self.n, self.spec_version, self.touch_mark)

    def stale_rows(self, mark: RowsMark) -> IntArray | None:
        """The rows whose pods or allocatable changed since `mark` (sorted, distinct); None
        when every row must be taken as changed: nodes came, went or changed labels or
        taints, or that part of the touch log was dropped."""
        n, spec_version, touched = mark
        if n != self.n or spec_version != self.spec_version:
            return None
        return self.touched_since(touched)

    def pod_vectors(self, pod: models.Pod) -> PodVectors:
        """The pod's request over this table's columns (pods=1 included). Memoised per pod
        uid while its containers are the same objects (an assumed copy shares them)."""
        ncols = len(self.resource_names)
        hit = self._vectors_memo.get(pod.uid)
        if (
            hit is not None
            and hit[0] is pod.containers
            and hit[1] is pod.init_containers
            and hit[2] is pod.overhead
            and hit[3] is pod.pod_requests
            and hit[4] == ncols
        ):
            return hit[5]
        vectors = self._compute_pod_vectors(pod)
        if len(self._vectors_memo) > 100_000:
            self._vectors_memo.clear()
        self._vectors_memo[pod.uid] = (
            pod.containers,
            pod.init_containers,
            pod.overhead,
            pod.pod_requests,
            ncols,
            vectors,
        )
        return vectors

    def forget_pod_vectors(self, uid: str) -> None:
        """Drop a pod's memoised vectors once the pod is gone for good (deleted or
        finished). Without this the memo kept every pod ever seen, with its containers,
        until its 100,000-entry reset: the scheduler's memory grew with churn."""
        self._vectors_memo.pop(uid, None)

    @property
    def memoised_pods(self) -> int:
        """How many pods' vectors the memo holds."""
        return len(self._vectors_memo)

    def _compute_pod_vectors(self, pod: models.Pod) -> PodVectors:
        vec = np.zeros(len(self.resource_names), dtype=np.int64)
        unknown: list[str] = []
        for name, amount in pod.requests.items():
            col = self.resource_col.get(name)
            if col is None:
                if amount:
                    unknown.append(name)
                continue
            vec[col] = amount
        vec[COL_PODS] = 1
        nz = models.effective_requests(pod, nonzero_defaults=True)
        return PodVectors(
            request=vec,
            nonzero_cpu=nz.get(models.CPU, 0),
            nonzero_memory=nz.get(models.MEMORY, 0),
            unknown=tuple(unknown),
        )

    def add_pod(self, node_name: str, pod: models.Pod) -> bool:
        """Count a pod's requests on a node. False if the node is not in the table."""
        row = self.row_of.get(node_name)
        if row is None:
            return False
        if pod.uid in self.pods[row]:
            self.remove_pod(node_name, pod.uid)
        vecs = self.pod_vectors(pod)
        if vecs.unknown:  # non-zero requests no column holds yet (a zero one needs none)
            for name in vecs.unknown:
                self._ensure_column(name)
            vecs = self.pod_vectors(pod)
        self._requested[row, : len(vecs.request)] += vecs.request
        self._nonzero[row, 0] += vecs.nonzero_cpu
        self._nonzero[row, 1] += vecs.nonzero_memory
        self.pods[row][pod.uid] = pod
        self._touch(row)
        self._pod_index.count(node_name, pod, 1, row=row)
        if pod.volumes:
            self.storage.count_pod(node_name, pod, 1)
        ports = self.used_ports[row]
        for hp in pod.host_ports:
            key = (hp.protocol or "TCP", hp.host_ip or "0.0.0.0", hp.port)
            ports[key] = ports.get(key, 0) + 1
        self.pod_version += 1
        return True

    def remove_pod(self, node_name: str, uid: str) -> models.Pod | None:
        row = self.row_of.get(node_name)
        if row is None:
            return None
        pod = self.pods[row].pop(uid, None)
        if pod is None:
            return None
        self._touch(row)
        self._pod_index.count(node_name, pod, -1, row=row)
        if pod.volumes:
            self.storage.count_pod(node_name, pod, -1)
        vecs = self.pod_vectors(pod)
        self._requested[row, : len(vecs.request)] -= vecs.request
        self._nonzero[row, 0] -= vecs.nonzero_cpu
        self._nonzero[row, 1] -= vecs.nonzero_memory
        ports = self.used_ports[row]
        for hp in pod.host_ports:
            key = (hp.protocol or "TCP", hp.host_ip or "0.0.0.0", hp.port)
            left = ports.get(key, 0) - 1
            if left > 0:
                ports[key] = left
            else:
                ports.pop(key, None)
        self.pod_version += 1
        return pod

    # ---- pod indexes for PodTopologySpread and InterPodAffinity (see podindex) ---------
    @property
    def pod_groups(self) -> dict[PodGroupKey, PodGroup]:
        return self._pod_index.groups

    @property
    def affinity_terms(self) -> dict[str, dict[AffinityTermKey, dict[str, int]]]:
        return self._pod_index.affinity_terms

    def pod_counts_by_row(
        self,
        match: Callable[[PodGroup], bool],
        *,
        required: LabelPair | None = None,
        key: Hashable = None,
    ) -> IntArray:
        """Per row, how many assigned pods of the groups `match` accepts run there;
        `required`, a label every accepted group carries, narrows the search; `key`, naming
        what `match` accepts for good, keeps the counts up to date between calls
        (`PodIndex.counts_by_row`)."""
        return self._pod_index.counts_by_row(
            match, self.row_of, self.n, layout=self.spec_version, required=required, key=key
        )

    def anti_affinity_candidates(self, labels: Mapping[str, str]) -> list[AffinityTermKey]:
        """The assigned pods' required anti-affinity terms a pod with `labels` may match."""
        return self._pod_index.anti_affinity_candidates(labels)

    # ---- memoised indexes over node specs (`splitsched.core.specmemo`) ---------------
    def memoised(self, key: tuple[object, ...], compute: Callable[[], _M]) -> _M:
        """`compute()`, kept until nodes come, go or change labels or taints: the
        plugins' own indexes over node specs (a volume's node affinity, say)."""
        return self._specs.memoised(self.spec_version, key, compute)

    def recently(self, key: tuple[object, ...], compute: Callable[[], _M]) -> _M:
        """`memoised`, for values keyed by what pods ask (a node selector's mask, say):
        only the most recently used stay, so pods asking ever new things cannot grow it
        without bound."""
        return self._specs.recently(self.spec_version, key, compute)

    def label_values(self, key: str) -> tuple[npt.NDArray[np.int32], list[str]]:
        """Per row, an index into the returned list of distinct values of label `key`;
        -1 where the node lacks the label. Topology domains come from this."""

        def compute() -> tuple[npt.NDArray[np.int32], list[str]]:
            ids = np.full(self.n, -1, dtype=np.int32)
            distinct: dict[str, int] = {}
            for row, node in enumerate(self.nodes):
                value = node.labels.get(key)
                if value is not None:
                    ids[row] = distinct.setdefault(value, len(distinct))
            return ids, list(distinct)

        return self.memoised(("values", key), compute)

    def label_equals(self, key: str, value: str) -> BoolArray:
        ids, values = self.label_values(key)
        try:
            idx = values.index(value)
        except ValueError:
            return np.zeros(self.n, dtype=np.bool_)
        return np.equal(ids, idx)

    def label_in(self, key: str, values: Iterable[str]) -> BoolArray:
        ids, distinct = self.label_values(key)
        wanted = [i for i, v in enumerate(distinct) if v in set(values)]
        if not wanted:
            return np.zeros(self.n, dtype=np.bool_)
        return np.isin(ids, np.asarray(wanted, dtype=np.int32))

    def label_exists(self, key: str) -> BoolArray:
        ids, _ = self.label_values(key)
        return ids >= 0

    def taint_groups(self) -> tuple[npt.NDArray[np.int32], list[tuple[models.Taint, ...]]]:
        """Nodes grouped by identical taint sets: per row a group id, and the groups. Most
        clusters have a handful of distinct sets, so a pod's tolerations are checked per
        group, not per node."""

        def compute() -> tuple[npt.NDArray[np.int32], list[tuple[models.Taint, ...]]]:
            ids = np.zeros(self.n, dtype=np.int32)
            groups: dict[tuple[models.Taint, ...], int] = {}
            for row, node in enumerate(self.nodes):
                ids[row] = groups.setdefault(node.taints, len(groups))
            return ids, list(groups)

        return self.memoised(("taints",), compute)

    def image_index(self) -> Mapping[str, tuple[IntArray, IntArray]]:
        """Per image name any node reports (status.images): the rows holding it and the
        size each of those nodes reports. A node listing a name twice counts once, with
        its first size. Empty while no node reports images."""

        def compute() -> dict[str, tuple[IntArray, IntArray]]:
            held: dict[str, tuple[list[int], list[int]]] = {}
            for row, node in enumerate(self.nodes):
                for image in node.images:
                    for name in image.names:
                        rows, sizes = held.setdefault(name, ([], []))
                        if not rows or rows[-1] != row:
                            rows.append(row)
                            sizes.append(image.size_bytes)
            return {
                name: (np.asarray(rows, dtype=np.int64), np.asarray(sizes, dtype=np.int64))
                for name, (rows, sizes) in held.items()
            }

        return self.memoised(("images",), compute)

    def node_name_array(self) -> npt.NDArray[np.object_]:
        return self.memoised(("names",), lambda: np.asarray(self.names, dtype=object))

    def free(self) -> IntArray:
        return self.allocatable - self.requested

    def requested_by_name(self, node_name: str) -> Mapping[str, int]:
        row = self.row_of[node_name]
        return {
            name: int(self._requested[row, col])
            for col, name in enumerate(self.resource_names)
            if self._requested[row, col]
        }
