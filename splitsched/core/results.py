"""What one scheduling cycle, an Explain or a score pass answers: plain frozen values.

Returned by `splitsched.core.algorithm.FrameworkAlgorithm` and read by the scheduler's
state (which pod goes where, why one fits nowhere), its API (Explain, Simulate) and the
traces. HiveD's algorithm contract (`seeds/000`): a cycle returns exactly one of bind info
(a node), preempt info (victims) or wait info (why, per node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from splitsched.core import framework, models
from splitsched.core.nodetable import FloatArray, IntArray

# Pseudo-plugin names for rejections that happen before any plugin runs.
NO_PROFILE = "SchedulerProfile"
INVALID_POD = "PodValidation"
NO_NODES = "NoNodes"
#: kube-scheduler's words when the cluster has no node (schedule_one.go ErrNoNodesAvailable).
NO_NODES_MESSAGE = "no nodes available to schedule pods"


@dataclass(frozen=True, slots=True)
class BindInfo:
    node: str
    score: float
    feasible_nodes: int


@dataclass(frozen=True, slots=True)
class PreemptInfo:
    """Evict these victims so the pod fits on `node` (HiveD's PodPreemptInfo)."""

    node: str
    victims: tuple[models.Pod, ...]
    wait: WaitInfo


@dataclass(frozen=True, slots=True)
class WaitInfo:
    """Why the pod fits nowhere (HiveD's PodWaitInfo). `failed_plugins` drives requeueing:
    only cluster events those plugins care about can make the pod fit."""

    summary: str
    reason_counts: Mapping[str, int]
    failed_plugins: frozenset[str]
    failed_node_reasons: Mapping[str, str] = field(default_factory=dict)
    #: Per node of `failed_node_reasons`, the Filter plugin (or pseudo-plugin such as
    #: PodValidation) that rejected it; absent where no plugin did (not suggested).
    failed_node_plugins: Mapping[str, str] = field(default_factory=dict)
    total_nodes: int = 0
    #: Not a verdict on the nodes but a plugin's error (kube's SchedulerError, retried
    #: after a backoff): `summary` is the error.
    scheduler_error: bool = False


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    """Exactly one of bind, preempt, wait is set."""

    bind: BindInfo | None = None
    preempt: PreemptInfo | None = None
    wait: WaitInfo | None = None
    state: framework.CycleState | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.bind, self.preempt, self.wait)) != 1:
            raise ValueError("ScheduleResult needs exactly one of bind, preempt, wait")


@dataclass(frozen=True, slots=True)
class PluginRejections:
    plugin: str
    rows: IntArray
    reasons: list[tuple[str, ...]]
    resolvable_by_preemption: bool


@dataclass(frozen=True, slots=True)
class Explanation:
    """Every filter plugin's verdict on every node (not just the first rejection)."""

    pod: models.Pod
    total_nodes: int
    feasible: IntArray
    rejections: list[PluginRejections]
    summary: str
    preemption_might_help: bool
    pod_error: str = ""


@dataclass(frozen=True, slots=True)
class ScoredNodes:
    rows: IntArray
    total: FloatArray
    per_plugin: Mapping[str, FloatArray]
    #: A PreScore plugin's error, as kube words it ("running PreScore plugin ..."): no
    #: scores then.
    error: str = ""


def format_summary(total: int, counts: Mapping[str, int]) -> str:
    """kube-scheduler's FitError message: "0/5 nodes are available: 2 Insufficient cpu, 3
    node(s) had untolerated taint(s)." (reasons sorted as it sorts them)."""
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    if not parts:
        return f"0/{total} nodes are available."
    return f"0/{total} nodes are available: {', '.join(parts)}."


def scheduler_error(plugin: str, message: str, total_nodes: int) -> WaitInfo:
    """A plugin failed (an error, not a verdict): the pod waits with kube's message and is
    retried after a backoff."""
    return WaitInfo(
        summary=message,
        reason_counts={},
        failed_plugins=frozenset({plugin}),
        total_nodes=total_nodes,
        scheduler_error=True,
    )


def rejected_by_status(status: framework.Status, total_nodes: int) -> WaitInfo:
    """Why a pod that fit a node was not placed there: a Reserve or Permit plugin said no
    (or asked it to wait, which this scheduler does not hold pods for)."""
    reasons = status.reasons or (f"rejected by {status.plugin}",)
    return WaitInfo(
        summary="; ".join(reasons),
        reason_counts={r: 1 for r in reasons},
        failed_plugins=frozenset({status.plugin or "Permit"}),
        total_nodes=total_nodes,
    )
