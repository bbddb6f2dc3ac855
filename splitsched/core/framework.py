"""The scheduling framework: extension points, plugin contracts and profiles.

Plugins judge the whole node table at once: a Filter returns a boolean mask over all rows,
a Score returns an array over the feasible rows. Per-node failure reasons are computed only
when someone needs them (an unschedulable pod, an Explain call), by asking the plugin about
the rows it rejected. Called by `splitsched.core.algorithm`, which runs one pod through
these points; configured by `splitsched.core.profiles` from YAML.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from splitsched.core import models
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable

MAX_NODE_SCORE = 100


class Code(enum.Enum):
    SUCCESS = "Success"
    # The pod does not fit; preemption might help.
    UNSCHEDULABLE = "Unschedulable"
    # The pod does not fit and preemption cannot help (affinity, taints, ...).
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    WAIT = "Wait"
    SKIP = "Skip"
    ERROR = "Error"


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    #: A PreFilter's success may name the only nodes worth filtering (kube-scheduler's
    #: PreFilterResult.NodeNames); None: every node.
    node_names: frozenset[str] | None = None

    @property
    def ok(self) -> bool:
        return self.code in (Code.SUCCESS, Code.SKIP)

    @staticmethod
    def success() -> Status:
        return _SUCCESS

    @staticmethod
    def skip() -> Status:
        return _SKIP

    @staticmethod
    def unschedulable(*reasons: str, plugin: str = "", resolvable: bool = True) -> Status:
        code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return Status(code, tuple(reasons), plugin)


_SUCCESS = Status()
_SKIP = Status(Code.SKIP)


@dataclass(frozen=True, slots=True)
class NodeSubset:
    """The only nodes a cycle filters: the intersection of the node sets its PreFilter
    plugins named, and which plugins named one. kube-scheduler never filters the other
    nodes and counts them under `left_out_reason`."""

    names: frozenset[str]
    plugins: tuple[str, ...]

    @property
    def left_out_reason(self) -> str:
        return f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(self.plugins))}]"

    @property
    def empty_reason(self) -> str:
        """kube's PreFilter rejection when the named sets have no node in common."""
        if len(self.plugins) == 1:
            return f"node(s) didn't satisfy plugin {self.plugins[0]}"
        return f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(self.plugins))}] simultaneously"

    def narrowed(self, plugin: str, names: frozenset[str]) -> NodeSubset:
        return NodeSubset(self.names & names, (*self.plugins, plugin))


class CycleState:
    """Per-pod scratch space shared by the plugins of one scheduling cycle."""

    __slots__ = ("_data", "filter_error", "node_subset", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        #: Set by PreFilter when a plugin named the only nodes worth filtering.
        self.node_subset: NodeSubset | None = None
        #: (plugin, kube's message) when a Filter plugin raised `FilterError`.
        self.filter_error: tuple[str, str] | None = None

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        return self._data.get(key)


class ClusterEvent(enum.Enum):
    """Cluster changes that can make an unschedulable pod schedulable; plugins declare which
    ones matter to them, and the queue requeues pods rejected by those plugins."""

    NODE_ADD = "NodeAdd"
    NODE_DELETE = "NodeDelete"
    NODE_ALLOCATABLE = "NodeAllocatableChange"
    NODE_LABEL = "NodeLabelChange"
    NODE_TAINT = "NodeTaintChange"
    NODE_SCHEDULABLE = "NodeSchedulableChange"
    ASSIGNED_POD_ADD = "AssignedPodAdd"
    ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
    ASSIGNED_POD_DELETE = "AssignedPodDelete"
    # A pending pod joined a pod group (gang): waiting members may now reach minMember.
    POD_GROUP_MEMBER_ADD = "PodGroupMemberAdd"
    # A namespace came, went or changed its labels: namespaceSelectors may match differently.
    NAMESPACE_CHANGE = "NamespaceChange"
    # Storage (the volume plugins).
    PVC_ADD = "PersistentVolumeClaimAdd"
    PVC_UPDATE = "PersistentVolumeClaimUpdate"
    PV_ADD = "PersistentVolumeAdd"
    PV_UPDATE = "PersistentVolumeUpdate"
    STORAGE_CLASS_ADD = "StorageClassAdd"
    STORAGE_CLASS_UPDATE = "StorageClassUpdate"
    CSI_NODE_ADD = "CSINodeAdd"
    CSI_NODE_UPDATE = "CSINodeUpdate"
    # Devices (Dynamic Resource Allocation).
    DEVICE_CLASS_ADD = "DeviceClassAdd"
    DEVICE_CLASS_UPDATE = "DeviceClassUpdate"
    RESOURCE_SLICE_ADD = "ResourceSliceAdd"
    RESOURCE_SLICE_UPDATE = "ResourceSliceUpdate"
    RESOURCE_CLAIM_ADD = "ResourceClaimAdd"
    RESOURCE_CLAIM_UPDATE = "ResourceClaimUpdate"


ALL_EVENTS = frozenset(ClusterEvent)

#: The CycleState key under which Reserve plugins leave the volume writes (a tuple of
#: `storage.VolumeBinding`) the binder makes before the pod's Binding: kube-scheduler's
#: VolumeBinding PreBind, carried by the decision (`FrameworkAlgorithm.prebind_volumes`).
PREBIND_VOLUMES = "PreBindVolumes"
#: The same for ResourceClaims (a tuple of `devices.model.ClaimWrite`): kube-scheduler's
#: DynamicResources PreBind (`FrameworkAlgorithm.prebind_claims`).
PREBIND_CLAIMS = "PreBindClaims"
#: Where DynamicResources' PostFilter leaves the claims to deallocate (a tuple of
#: `devices.model.ClaimRef`): kube-scheduler writes that from its PostFilter; here the
#: pod's unschedulable report carries it to a binder.
DEALLOCATE_CLAIMS = "DeallocateClaims"


class Plugin(Protocol):
    name: ClassVar[str]


@runtime_checkable
class PreFilterPlugin(Protocol):
    name: ClassVar[str]

    def pre_filter(self, state: CycleState, pod: models.Pod, table: NodeTable) -> Status:
        """Reject the pod outright (unschedulable on every node), return SKIP to drop this
        plugin's Filter for this pod, or SUCCESS. May stash data in `state`."""
        ...


@runtime_checkable
class FilterPlugin(Protocol):
    name: ClassVar[str]
    # False when evicting pods can never make a rejected node fit (taints, affinity...).
    resolvable_by_preemption: ClassVar[bool]
    events: ClassVar[frozenset[ClusterEvent]]

    def filter(self, state: CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        """True for every row the pod may run on, over all `table.n` rows."""
        ...

    def failure_reasons(
        self, state: CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[tuple[str, ...]]:
        """For each given row (rows this plugin rejected), why: kube-scheduler's wording,
        e.g. ("Insufficient cpu",) or ("node(s) didn't match Pod's node affinity/selector",)."""
        ...


class FilterError(Exception):
    """A Filter plugin's error, not a verdict on nodes (kube's Filter Error status): the
    cycle fails as kube's does, `running "<plugin>" filter plugin: <message>`, without
    PostFilter, and the pod is tried again after a backoff."""


@runtime_checkable
class FilterWithin(Protocol):
    """A Filter plugin that costs much per node judges only the rows still feasible when
    its turn comes, as kube runs a Filter only on nodes the earlier ones passed."""

    def filter_within(
        self, state: CycleState, pod: models.Pod, table: NodeTable, rows: BoolArray
    ) -> BoolArray:
        """As `filter`, but rows outside `rows` may be answered False without judging."""
        ...


@runtime_checkable
class PartlyResolvable(Protocol):
    """A Filter plugin whose rejections differ in kind: on some nodes evicting pods could
    make the pod fit (kube's Unschedulable), on others nothing could
    (UnschedulableAndUnresolvable: a request above the node's allocatable, a required pod
    affinity no pod matches, a missing topology label). Preemption tries only the former."""

    def unresolvable(
        self, state: CycleState, pod: models.Pod, table: NodeTable, rows: Sequence[int]
    ) -> list[bool]:
        """For each given row (rows this plugin rejected), whether no eviction can help."""
        ...


#: Why the pod does not fit one row of the table as it is at that moment, in the words of
#: the first plugin that rejects it; empty when it fits (PostFilter's what-if).
Misfit = Callable[[int], tuple[str, ...]]


@runtime_checkable
class PostFilterPlugin(Protocol):
    name: ClassVar[str]

    def post_filter(
        self,
        state: CycleState,
        pod: models.Pod,
        table: NodeTable,
        candidates: Sequence[int],
        misfit: Misfit,
    ) -> PostFilterResult | Status:
        """Called when no node fits, in profile order. `candidates` are the rows whose
        rejection evicting pods could resolve; `misfit(row)` runs the pod's PreFilter and
        Filter afresh against the table as it is at that moment, so a plugin may change the
        table temporarily (and must restore it) to ask "what if". Returns a nomination (e.g.
        preemption victims), or a status whose reasons say why not: kube-scheduler appends
        the Unschedulable ones to the FailedScheduling message."""
        ...


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    node: str
    victims: tuple[models.Pod, ...] = ()


@runtime_checkable
class PreScorePlugin(Protocol):
    name: ClassVar[str]

    def pre_score(
        self, state: CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> Status:
        """Prepare scoring over the feasible `rows`; SKIP drops this plugin's Score."""
        ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: ClassVar[str]

    def score(
        self, state: CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> FloatArray:
        """A score per feasible row (same order as `rows`), in [0, MAX_NODE_SCORE] once
        normalised."""
        ...

    def normalize(self, state: CycleState, pod: models.Pod, scores: FloatArray) -> FloatArray:
        """NormalizeScore: map raw scores to [0, MAX_NODE_SCORE]; identity if not needed."""
        ...


@runtime_checkable
class ReservePlugin(Protocol):
    name: ClassVar[str]

    def reserve(self, state: CycleState, pod: models.Pod, node: str) -> Status:
        """SUCCESS (reserved: Unreserve undoes it), SKIP (nothing to reserve for this pod,
        so nothing is kept for it) or a rejection."""
        ...

    def unreserve(self, state: CycleState, pod: models.Pod, node: str) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    name: ClassVar[str]

    def permit(self, state: CycleState, pod: models.Pod, node: str) -> Status:
        """SUCCESS, WAIT (hold the pod assumed until allowed) or a rejection."""
        ...


def default_normalize(scores: FloatArray) -> FloatArray:
    """Scale so the best node gets MAX_NODE_SCORE, in integers as kube-scheduler's
    DefaultNormalizeScore does (100 * s // max)."""
    if scores.size == 0:
        return scores
    top = int(scores.max())
    if top <= 0:
        return np.zeros_like(scores)
    return ((scores.astype(np.int64) * MAX_NODE_SCORE) // top).astype(np.float64)


def reverse_normalize(scores: FloatArray) -> FloatArray:
    """DefaultNormalizeScore with reverse=true: fewer is better (used by TaintToleration)."""
    if scores.size == 0:
        return scores
    top = int(scores.max())
    if top <= 0:
        return np.full_like(scores, float(MAX_NODE_SCORE))
    scaled = (scores.astype(np.int64) * MAX_NODE_SCORE) // top
    return (MAX_NODE_SCORE - scaled).astype(np.float64)


PluginFactory = Callable[[Mapping[str, Any]], object]
"""Builds a plugin from its `pluginConfig` args (an empty mapping when none are given)."""


@dataclass(frozen=True)
class ScoreEntry:
    plugin: ScorePlugin
    weight: int


@dataclass
class Profile:
    """One schedulerName's plugin set, in the order each extension point runs them."""

    scheduler_name: str
    pre_filter: list[PreFilterPlugin] = field(default_factory=list)
    filter: list[FilterPlugin] = field(default_factory=list)
    post_filter: list[PostFilterPlugin] = field(default_factory=list)
    pre_score: list[PreScorePlugin] = field(default_factory=list)
    score: list[ScoreEntry] = field(default_factory=list)
    reserve: list[ReservePlugin] = field(default_factory=list)
    permit: list[PermitPlugin] = field(default_factory=list)
    _lean: tuple[tuple[int, int, int], Profile] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def without_volume_plugins(self) -> Profile:
        """The profile a pod without volumes runs: less the plugins marked `volumes_only`
        (their PreFilter and Reserve SKIP such a pod, so leaving them out changes nothing
        but the cost). Shares every other list; rebuilt when the PreFilter, Filter or
        Reserve list changed length."""
        key = (len(self.pre_filter), len(self.filter), len(self.reserve))
        if self._lean is None or self._lean[0] != key:
            lean = dataclasses.replace(
                self,
                pre_filter=[p for p in self.pre_filter if not _volumes_only(p)],
                filter=[p for p in self.filter if not _volumes_only(p)],
                reserve=[p for p in self.reserve if not _volumes_only(p)],
            )
            self._lean = (key, lean)
        return self._lean[1]

    def events_for(self, plugin_names: set[str]) -> frozenset[ClusterEvent]:
        """The cluster events that could make a pod rejected by these plugins fit."""
        out: set[ClusterEvent] = set()
        for p in self.filter:
            if p.name in plugin_names:
                out |= p.events
        for name in plugin_names:
            if name not in {p.name for p in self.filter}:
                return ALL_EVENTS  # a prefilter/permit rejection: be safe, any event
        return frozenset(out)


def _volumes_only(plugin: object) -> bool:
    """A plugin with nothing to do for a pod without volumes (the volume plugins)."""
    return bool(getattr(plugin, "volumes_only", False))
