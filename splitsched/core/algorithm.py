"""The scheduling algorithm: one pod through the framework against the cache's node table.

Implements HiveD's SchedulerAlgorithm contract (`seeds/000`): `schedule(pod,
suggested_nodes)` returns exactly one of bind info (a node), preempt info (victims) or
wait info (why, per node); nodes and allocated pods are tracked through
add/update/delete calls. Used by the scheduler service's loop, by `splitsched simulate`
offline, and by the Explain/Simulate API. Pure: no I/O, randomness from an injected RNG.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from splitsched.core import framework, models
from splitsched.core.cache import SchedulerCache
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from splitsched.core.nominator import Nominator, interacts
from splitsched.core.observer import NO_OBSERVER, CycleObserver

# Pseudo-plugin names for rejections that happen before any plugin runs.
NO_PROFILE = "SchedulerProfile"
INVALID_POD = "PodValidation"
NO_NODES = "NoNodes"
# Rows that fit only without the pods nominated there (of at least the pod's priority).
NOMINATED_PODS = "NominatedPods"
NOMINATED_REASON = "node(s) had room held for nominated pods of equal or higher priority"


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


class SchedulerAlgorithm(Protocol):
    """HiveD's algorithm contract, as this project uses it."""

    def schedule(
        self, pod: models.Pod, suggested_nodes: Sequence[str] | None = None
    ) -> ScheduleResult: ...

    def add_node(self, node: models.Node) -> None: ...

    def update_node(self, node: models.Node) -> None: ...

    def delete_node(self, name: str) -> None: ...

    def add_allocated_pod(self, pod: models.Pod) -> None: ...

    def delete_allocated_pod(self, uid: str) -> None: ...


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


@dataclass(slots=True)
class _RawScores:
    """Raw (unnormalised) scores of row-local plugins over all rows for one pod shape."""

    key: tuple[object, ...]
    n: int
    spec_version: int
    mark: int
    raw: dict[str, FloatArray]


def _shape_of(pod: models.Pod) -> tuple[object, ...]:
    """What row-local scoring reads of a pod: requests, tolerations, node affinity."""
    return (
        tuple(sorted(pod.requests.items())),
        pod.containers,
        pod.init_containers,
        tuple(sorted(pod.pod_requests.items())),
        tuple(sorted(pod.overhead.items())),
        pod.tolerations,
        pod.node_affinity,
        tuple(sorted(pod.node_selector.items())),
    )


def format_summary(total: int, counts: Mapping[str, int]) -> str:
    """kube-scheduler's FitError message: "0/5 nodes are available: 2 Insufficient cpu, 3
    node(s) had untolerated taint {gpu: true}." (reasons sorted as it sorts them)."""
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    if not parts:
        return f"0/{total} nodes are available."
    return f"0/{total} nodes are available: {', '.join(parts)}."


class FrameworkAlgorithm:
    """Runs a profile's plugins over the whole node table at once, telling its `observer`
    (`splitsched.core.observer`: tracing, when on) as each step starts and finishes."""

    def __init__(
        self,
        *,
        cache: SchedulerCache,
        profiles: Mapping[str, framework.Profile],
        rng: random.Random | None = None,
        nominator: Nominator | None = None,
        observer: CycleObserver = NO_OBSERVER,
    ) -> None:
        self.cache = cache
        self.profiles = dict(profiles)
        self.rng = rng or random.Random(0)
        self.nominator = nominator if nominator is not None else Nominator()
        #: Told about each step of a cycle (schedule, score, assume, place_gang): tracing.
        self.observer = observer
        self._memo: _RawScores | None = None

    @property
    def table(self) -> NodeTable:
        return self.cache.table

    # ---- HiveD's tracking calls --------------------------------------------------------
    def add_node(self, node: models.Node) -> None:
        self.cache.add_node(node)

    def update_node(self, node: models.Node) -> None:
        self.cache.update_node(node)

    def delete_node(self, name: str) -> None:
        self.cache.remove_node(name)

    def add_allocated_pod(self, pod: models.Pod) -> None:
        self.cache.add_pod(pod)

    def delete_allocated_pod(self, uid: str) -> None:
        self.cache.remove_pod(uid)

    # ---- the cycle ---------------------------------------------------------------------
    def profile_for(self, pod: models.Pod) -> framework.Profile | None:
        return self.profiles.get(pod.scheduler_name)

    def _reject_all(self, plugin: str, reasons: Sequence[str]) -> WaitInfo:
        n = self.table.n
        counts = {r: n for r in reasons} if n else {}
        summary = format_summary(n, counts)
        if n == 0 or plugin in (INVALID_POD, NO_PROFILE):
            summary = f"{summary[:-1]}: {'; '.join(reasons)}." if n == 0 else summary
        return WaitInfo(
            summary=summary,
            reason_counts=counts,
            failed_plugins=frozenset({plugin}),
            failed_node_reasons={name: "; ".join(reasons) for name in self.table.names},
            failed_node_plugins=dict.fromkeys(self.table.names, plugin),
            total_nodes=n,
        )

    def _pre_filter(
        self, profile: framework.Profile, state: framework.CycleState, pod: models.Pod
    ) -> WaitInfo | None:
        for p in profile.pre_filter:
            status = p.pre_filter(state, pod, self.table)
            if status.code is framework.Code.SKIP:
                state.skip_filter.add(p.name)
            elif not status.ok:
                return self._reject_all(p.name, status.reasons or (f"rejected by {p.name}",))
        return None

    def _filter(
        self,
        profile: framework.Profile,
        state: framework.CycleState,
        pod: models.Pod,
        suggested: BoolArray | None,
        *,
        nominated: bool = True,
    ) -> tuple[BoolArray, IntArray]:
        """The feasible mask and, per row, the index of the first filter that rejected it
        (-1 where feasible; len(profile.filter) where only `suggested` excluded it;
        len(profile.filter) + 1 where it fits only without the pods nominated there)."""
        n = self.table.n
        mask = np.ones(n, dtype=np.bool_) if suggested is None else suggested.copy()
        rejected_by = np.full(n, -1, dtype=np.int64)
        if suggested is not None:
            rejected_by[~suggested] = len(profile.filter)
        for i, plugin in enumerate(profile.filter):
            if plugin.name in state.skip_filter:
                continue
            fits = plugin.filter(state, pod, self.table)
            newly = mask & ~fits
            if newly.any():
                rejected_by[newly] = i
                mask &= fits
                if not mask.any():
                    break
        if nominated and self.nominator and mask.any():
            self._keep_nominated_rooms(profile, pod, mask, rejected_by)
        return mask, rejected_by

    # ---- rooms held for nominated pods ---------------------------------------------------
    def _held_rooms(self, pod: models.Pod, rows: BoolArray) -> dict[int, list[models.Pod]]:
        """Among `rows`, those with pods nominated there whose priority is at least the
        pod's (not the pod itself, nor a pod the cache already counts somewhere)."""
        held: dict[int, list[models.Pod]] = {}
        row_of = self.table.row_of
        cache = self.cache
        for node, pods in self.nominator.by_node():
            row = row_of.get(node)
            if row is None or not rows[row]:
                continue
            keep = [
                p
                for p in pods.values()
                if p.priority >= pod.priority and p.uid != pod.uid and p.uid not in cache
            ]
            if keep:
                held[row] = keep
        return held

    def _surely_fitting_dropped(
        self, pod: models.Pod, held: dict[int, list[models.Pod]]
    ) -> dict[int, list[models.Pod]]:
        """Drop the rows where the pod fits beside its nominees on resources alone and
        nothing else about pods can matter (neither the pod nor those nominees
        `nominator.interacts`). The check is stricter than NodeResourcesFit (every column
        the pod requests, none ignored), and among the filters only it and NodePorts,
        InterPodAffinity and PodTopologySpread read pods, so a dropped row surely fits;
        the rest get the full what-if. The common case (plain pods) costs a few array
        operations instead of a filter pass."""
        if not held or interacts(pod):
            return held
        table = self.table
        vec = table.pod_vectors(pod).request
        cols = np.flatnonzero(vec)  # includes the pods column
        interacting = self.nominator.interacting
        kept: dict[int, list[models.Pod]] = {}
        rows: list[int] = []
        starts: list[int] = []
        vectors: list[IntArray] = []
        for row, nominees in held.items():
            if interacting and any(n.uid in interacting for n in nominees):
                kept[row] = nominees
                continue
            rows.append(row)
            starts.append(len(vectors))
            # pod_vectors always spans the table's current columns.
            vectors.extend(table.pod_vectors(n).request for n in nominees)
        if rows:
            at = np.asarray(rows, dtype=np.int64)
            need = np.add.reduceat(np.stack(vectors)[:, cols], starts, axis=0) + vec[cols]
            free = table.allocatable[at][:, cols] - table.requested[at][:, cols]
            for row in at[~np.all(need <= free, axis=1)].tolist():
                kept[row] = held[row]
        return kept

    @contextlib.contextmanager
    def _counting(self, held: Mapping[int, Sequence[models.Pod]]) -> Iterator[None]:
        """Count the held pods on their rows while the block runs; the table is restored
        exactly afterwards."""
        table = self.table
        added: list[tuple[str, str]] = []
        try:
            for row, pods in held.items():
                node = table.names[row]
                for p in pods:
                    table.add_pod(node, p)
                    added.append((node, p.uid))
            yield
        finally:
            for node, uid in reversed(added):
                table.remove_pod(node, uid)

    def _filter_afresh(
        self, profile: framework.Profile, pod: models.Pod
    ) -> tuple[BoolArray, IntArray, framework.CycleState] | None:
        """PreFilter and Filter on the table as it is now (no nominated pods added);
        None when PreFilter rejects the pod outright."""
        fresh = framework.CycleState()
        if self._pre_filter(profile, fresh, pod) is not None:
            return None
        mask, rejected_by = self._filter(profile, fresh, pod, None, nominated=False)
        return mask, rejected_by, fresh

    def _keep_nominated_rooms(
        self,
        profile: framework.Profile,
        pod: models.Pod,
        mask: BoolArray,
        rejected_by: IntArray,
    ) -> None:
        """kube-scheduler's RunFilterPluginsWithNominatedPods: a feasible row with pods
        nominated there (of at least this pod's priority) stays feasible only if the pod
        also fits with them counted. Only those rows are judged again: one more filter
        pass, and none at all while nothing is nominated to a feasible row."""
        held = self._surely_fitting_dropped(pod, self._held_rooms(pod, mask))
        if not held:
            return
        with self._counting(held):
            again = self._filter_afresh(profile, pod)
        rows = np.fromiter(held, dtype=np.int64, count=len(held))
        lost = rows if again is None else rows[~again[0][rows]]
        if lost.size:
            mask[lost] = False
            rejected_by[lost] = len(profile.filter) + 1

    def _nominated_rejections(
        self, profile: framework.Profile, pod: models.Pod, mask: BoolArray
    ) -> PluginRejections | None:
        """For Explain: the feasible rows the pod fits only without the pods nominated
        there, with the reasons it does not fit with them."""
        held = mask.copy()
        self._keep_nominated_rooms(profile, pod, held, np.full(mask.size, -1, dtype=np.int64))
        lost = np.flatnonzero(mask & ~held)
        if lost.size == 0:
            return None
        reasons_of, _ = self._held_room_reasons(profile, pod, lost.tolist())
        reasons = [reasons_of[row] for row in lost.tolist()]
        return PluginRejections(NOMINATED_PODS, lost, reasons, True)

    def _held_room_reasons(
        self, profile: framework.Profile, pod: models.Pod, rows: Sequence[int]
    ) -> tuple[dict[int, tuple[str, ...]], set[str]]:
        """Why each of `rows` (lost to nominated pods) rejects the pod with them counted,
        in the rejecting plugin's words ("Insufficient cpu"), and those plugins' names."""
        only = np.zeros(self.table.n, dtype=np.bool_)
        only[list(rows)] = True
        out: dict[int, tuple[str, ...]] = dict.fromkeys(rows, (NOMINATED_REASON,))
        failed: set[str] = set()
        with self._counting(self._held_rooms(pod, only)):
            again = self._filter_afresh(profile, pod)
            if again is not None:
                _, by, fresh = again
                for i, plugin in enumerate(profile.filter):
                    mine = [r for r in rows if by[r] == i]
                    if mine:
                        failed.add(plugin.name)
                        reasons = plugin.failure_reasons(fresh, pod, self.table, mine)
                        out.update(zip(mine, reasons, strict=True))
        if any(r == (NOMINATED_REASON,) for r in out.values()):
            failed.add(NOMINATED_PODS)  # not a filter's verdict: any event may change it
        return out, failed

    def _wait_from_rejections(
        self,
        profile: framework.Profile,
        state: framework.CycleState,
        pod: models.Pod,
        rejected_by: IntArray,
    ) -> WaitInfo:
        counts: Counter[str] = Counter()
        node_reasons: dict[str, str] = {}
        node_plugins: dict[str, str] = {}
        failed: set[str] = set()
        names = self.table.names
        for i, plugin in enumerate(profile.filter):
            rows = np.flatnonzero(rejected_by == i)
            if rows.size == 0:
                continue
            failed.add(plugin.name)
            reasons = plugin.failure_reasons(state, pod, self.table, rows.tolist())
            for row, rs in zip(rows.tolist(), reasons, strict=True):
                counts.update(rs)
                node_reasons[names[row]] = "; ".join(rs)
                node_plugins[names[row]] = plugin.name
        outside = np.flatnonzero(rejected_by == len(profile.filter))
        if outside.size:
            counts["node(s) were not among the suggested nodes"] += int(outside.size)
            for row in outside.tolist():
                node_reasons[names[row]] = "not among the suggested nodes"
        held = np.flatnonzero(rejected_by == len(profile.filter) + 1)
        if held.size:
            reasons_of, plugins = self._held_room_reasons(profile, pod, held.tolist())
            failed |= plugins
            for row, rs in reasons_of.items():
                counts.update(rs)
                node_reasons[names[row]] = "; ".join(rs)
                node_plugins[names[row]] = NOMINATED_PODS
        return WaitInfo(
            summary=format_summary(self.table.n, counts),
            reason_counts=dict(counts),
            failed_plugins=frozenset(failed),
            failed_node_reasons=node_reasons,
            failed_node_plugins=node_plugins,
            total_nodes=self.table.n,
        )

    def score(
        self,
        profile: framework.Profile,
        state: framework.CycleState,
        pod: models.Pod,
        rows: IntArray,
    ) -> ScoredNodes:
        """Weighted, normalised scores of the feasible rows."""
        total = np.zeros(rows.size, dtype=np.float64)
        per_plugin: dict[str, FloatArray] = {}
        for pre in profile.pre_score:
            status = pre.pre_score(state, pod, self.table, rows)
            if status.code is framework.Code.SKIP:
                state.skip_score.add(pre.name)
        active = [e for e in profile.score if e.plugin.name not in state.skip_score]
        memo = self._score_memo(profile, state, pod, active)
        for entry in active:
            plugin = entry.plugin
            if memo is not None and plugin.name in memo.raw:
                raw = memo.raw[plugin.name][rows]
            else:
                raw = plugin.score(state, pod, self.table, rows)
            normalised = plugin.normalize(state, pod, np.asarray(raw, dtype=np.float64))
            per_plugin[plugin.name] = normalised
            total += entry.weight * normalised
        return ScoredNodes(rows=rows, total=total, per_plugin=per_plugin)

    def _score_memo(
        self,
        profile: framework.Profile,
        state: framework.CycleState,
        pod: models.Pod,
        active: Sequence[framework.ScoreEntry],
    ) -> _RawScores | None:
        """Raw scores over every row for the plugins whose score of a node depends only on
        that node and the pod's shape, kept up to date incrementally: consecutive pods of
        one shape (a Deployment's replicas) rescore only the rows that changed since.
        None when some active plugin looks beyond single nodes (spread, inter-pod
        affinity): then everything is computed afresh, exactly as before."""
        if any(not getattr(e.plugin, "row_local", False) for e in active):
            return None
        table = self.table
        key = (profile.scheduler_name, *_shape_of(pod), tuple(e.plugin.name for e in active))
        memo = self._memo
        stale: IntArray | None = None
        if (
            memo is not None
            and memo.key == key
            and memo.n == table.n
            and memo.spec_version == table.spec_version
        ):
            stale = table.touched_since(memo.mark)
        if memo is None or stale is None:
            everything = np.arange(table.n, dtype=np.int64)
            memo = _RawScores(
                key=key,
                n=table.n,
                spec_version=table.spec_version,
                mark=table.touch_mark,
                raw={
                    e.plugin.name: np.asarray(
                        e.plugin.score(state, pod, table, everything), dtype=np.float64
                    )
                    for e in active
                },
            )
            self._memo = memo
            return memo
        if stale.size:
            for entry in active:
                memo.raw[entry.plugin.name][stale] = entry.plugin.score(state, pod, table, stale)
        memo.mark = table.touch_mark
        return memo

    def _select(self, scored: ScoredNodes) -> int:
        best = np.flatnonzero(scored.total >= scored.total.max() - 1e-9)
        if best.size == 1:
            return int(best[0])
        return int(best[self.rng.randrange(best.size)])

    def _suggested_mask(self, suggested_nodes: Sequence[str] | None) -> BoolArray | None:
        if suggested_nodes is None:
            return None
        mask = np.zeros(self.table.n, dtype=np.bool_)
        for name in suggested_nodes:
            row = self.table.row_of.get(name)
            if row is not None:
                mask[row] = True
        return mask

    def schedule(
        self, pod: models.Pod, suggested_nodes: Sequence[str] | None = None
    ) -> ScheduleResult:
        """One scheduling cycle without side effects on the cache (see `assume`)."""
        self.observer.schedule_started(pod)
        result = self._schedule_cycle(pod, suggested_nodes)
        self.observer.schedule_finished(pod, result)
        return result

    def _schedule_cycle(
        self, pod: models.Pod, suggested_nodes: Sequence[str] | None
    ) -> ScheduleResult:
        state = framework.CycleState()
        profile = self.profile_for(pod)
        if profile is None:
            reason = f"no scheduler profile named {pod.scheduler_name!r}"
            return ScheduleResult(wait=self._reject_all(NO_PROFILE, (reason,)), state=state)
        if pod.invalid_reason:
            reason = f"pod is invalid: {pod.invalid_reason}"
            return ScheduleResult(wait=self._reject_all(INVALID_POD, (reason,)), state=state)
        if self.table.n == 0:
            return ScheduleResult(wait=self._reject_all(NO_NODES, ()), state=state)
        rejected = self._pre_filter(profile, state, pod)
        if rejected is not None:
            return ScheduleResult(wait=rejected, state=state)
        mask, rejected_by = self._filter(profile, state, pod, self._suggested_mask(suggested_nodes))
        feasible = np.flatnonzero(mask)
        if feasible.size == 0:
            wait = self._wait_from_rejections(profile, state, pod, rejected_by)
            resolvable = [
                i for i, plugin in enumerate(profile.filter) if plugin.resolvable_by_preemption
            ]
            resolvable.append(len(profile.filter) + 1)  # rooms held for nominated pods
            candidates = np.flatnonzero(np.isin(rejected_by, resolvable)).tolist()

            def fits() -> BoolArray:
                fresh = framework.CycleState()
                if self._pre_filter(profile, fresh, pod) is not None:
                    return np.zeros(self.table.n, dtype=np.bool_)
                return self._filter(profile, fresh, pod, None)[0]

            for post in profile.post_filter if candidates else ():
                nominated = post.post_filter(state, pod, self.table, candidates, fits)
                if nominated is not None:
                    return ScheduleResult(
                        preempt=PreemptInfo(nominated.node, nominated.victims, wait),
                        state=state,
                    )
            return ScheduleResult(wait=wait, state=state)
        if feasible.size == 1:
            node = self.table.names[int(feasible[0])]
            return ScheduleResult(bind=BindInfo(node, 0.0, 1), state=state)
        self.observer.score_started(pod)
        scored = self.score(profile, state, pod, feasible)
        self.observer.score_finished(pod)
        pick = self._select(scored)
        node = self.table.names[int(feasible[pick])]
        return ScheduleResult(
            bind=BindInfo(node, float(scored.total[pick]), int(feasible.size)), state=state
        )

    def scored_nodes(self, profile: framework.Profile, pod: models.Pod) -> ScoredNodes | None:
        """Scores of every feasible node (for Simulate's top nodes); None if none fits."""
        state = framework.CycleState()
        if self._pre_filter(profile, state, pod) is not None:
            return None
        mask, _ = self._filter(profile, state, pod, None)
        rows = np.flatnonzero(mask)
        return self.score(profile, state, pod, rows) if rows.size else None

    # ---- committing a decision ---------------------------------------------------------
    def assume(
        self, pod: models.Pod, node: str, state: framework.CycleState | None = None
    ) -> framework.Status:
        """Assume the pod on the node in the cache, then run Reserve and Permit. On any
        rejection everything is undone and the status says why. WAIT from Permit leaves
        the pod assumed (the caller holds it until allowed)."""
        self.observer.assume_started(pod, node)
        status = self._assume_reserve_permit(pod, node, state)
        self.observer.assume_finished(pod, node, status)
        return status

    def _assume_reserve_permit(
        self, pod: models.Pod, node: str, state: framework.CycleState | None
    ) -> framework.Status:
        state = state or framework.CycleState()
        profile = self.profile_for(pod)
        self.cache.assume(pod, node)
        if profile is None:
            return framework.Status.success()
        reserved: list[framework.ReservePlugin] = []
        for plugin in profile.reserve:
            status = plugin.reserve(state, pod, node)
            if not status.ok:
                for done in reversed(reserved):
                    done.unreserve(state, pod, node)
                self.cache.forget(pod.uid)
                return status
            reserved.append(plugin)
        for permit in profile.permit:
            status = permit.permit(state, pod, node)
            if status.code is framework.Code.WAIT:
                return status
            if not status.ok:
                for done in reversed(reserved):
                    done.unreserve(state, pod, node)
                self.cache.forget(pod.uid)
                return status
        return framework.Status.success()

    def place_gang(
        self, pods: Sequence[models.Pod]
    ) -> tuple[list[tuple[models.Pod, str]], models.Pod | None, WaitInfo | None]:
        """All or nothing, in one cycle: schedule and assume each member in turn (each sees
        the ones before it); if one fits nowhere, forget every assumption made here and
        return that member and why. Returns (placements, blocking member, its wait)."""
        self.observer.gang_started(pods)
        placed, blocking, wait = self._place_all_or_none(pods)
        self.observer.gang_finished(pods, placed, blocking)
        return placed, blocking, wait

    def _place_all_or_none(
        self, pods: Sequence[models.Pod]
    ) -> tuple[list[tuple[models.Pod, str]], models.Pod | None, WaitInfo | None]:
        placed: list[tuple[models.Pod, str]] = []
        for pod in pods:
            result = self.schedule(pod)
            blocked: WaitInfo | None = None
            if result.bind is not None:
                status = self.assume(pod, result.bind.node, result.state)
                if status.ok:
                    placed.append((pod, result.bind.node))
                    continue
                reasons = status.reasons or (f"rejected by {status.plugin}",)
                blocked = WaitInfo(
                    summary="; ".join(reasons),
                    reason_counts={r: 1 for r in reasons},
                    failed_plugins=frozenset({status.plugin or "Permit"}),
                    total_nodes=self.table.n,
                )
            else:
                # Preemption is not attempted for gangs: the whole gang would need room.
                blocked = result.wait if result.wait is not None else result.preempt.wait  # type: ignore[union-attr]
            for done, _ in reversed(placed):
                self.cache.forget(done.uid)
            return [], pod, blocked
        return placed, None, None

    # ---- explain and what-if -----------------------------------------------------------
    def explain(self, pod: models.Pod) -> Explanation:
        """Run every filter on every node and keep all rejections (an Explain call)."""
        table = self.table
        n = table.n
        state = framework.CycleState()
        profile = self.profile_for(pod)
        if profile is None or pod.invalid_reason:
            error = (
                f"pod is invalid: {pod.invalid_reason}"
                if pod.invalid_reason
                else f"no scheduler profile named {pod.scheduler_name!r}"
            )
            return Explanation(
                pod, n, np.zeros(0, dtype=np.int64), [], error, False, pod_error=error
            )
        rejections: list[PluginRejections] = []
        mask = np.ones(n, dtype=np.bool_)
        for pre in profile.pre_filter:
            status = pre.pre_filter(state, pod, table)
            if status.code is framework.Code.SKIP:
                state.skip_filter.add(pre.name)
            elif not status.ok:
                rows = np.arange(n, dtype=np.int64)
                reasons = [status.reasons or (f"rejected by {pre.name}",)] * n
                rejections.append(PluginRejections(pre.name, rows, reasons, False))
                mask[:] = False
        first_counts: Counter[str] = Counter()
        first_seen = np.zeros(n, dtype=np.bool_)
        if not rejections:
            for plugin in profile.filter:
                if plugin.name in state.skip_filter:
                    continue
                fits = plugin.filter(state, pod, table)
                rows = np.flatnonzero(~fits)
                if rows.size == 0:
                    continue
                reasons = plugin.failure_reasons(state, pod, table, rows.tolist())
                rejections.append(
                    PluginRejections(plugin.name, rows, reasons, plugin.resolvable_by_preemption)
                )
                for row, rs in zip(rows.tolist(), reasons, strict=True):
                    if not first_seen[row]:
                        first_counts.update(rs)
                        first_seen[row] = True
                mask &= fits
            if self.nominator and mask.any():
                kept = self._nominated_rejections(profile, pod, mask)
                if kept is not None:
                    rejections.append(kept)
                    for rs in kept.reasons:
                        first_counts.update(rs)
                    mask[kept.rows] = False
        else:
            first_counts.update({r: n for r in rejections[0].reasons[0]} if n else {})
        feasible = np.flatnonzero(mask)
        unresolvable = np.zeros(n, dtype=np.bool_)
        for rej in rejections:
            if not rej.resolvable_by_preemption:
                unresolvable[rej.rows] = True
        might_help = (
            feasible.size == 0
            and pod.preemption_policy != "Never"
            and bool((~unresolvable).any())
            and any(
                any(p.priority < pod.priority for p in table.pods[row].values())
                for row in np.flatnonzero(~unresolvable).tolist()
            )
        )
        summary = (
            f"{feasible.size}/{n} nodes are available."
            if feasible.size
            else format_summary(n, first_counts)
        )
        return Explanation(pod, n, feasible, rejections, summary, might_help)

    def simulate(
        self, pods: Iterable[models.Pod], *, gang: bool = False
    ) -> list[tuple[models.Pod, ScheduleResult, ScoredNodes | None]]:
        """Place pods one after another as the scheduler would, each seeing the ones before
        it, then undo every assumption: the cache is left exactly as it was. With `gang`,
        a pod that fits nowhere makes the whole group unplaced."""
        results: list[tuple[models.Pod, ScheduleResult, ScoredNodes | None]] = []
        assumed: list[str] = []
        saved_rng = self.rng.getstate()
        try:
            for pod in pods:
                result = self.schedule(pod)
                scored: ScoredNodes | None = None
                profile = self.profile_for(pod)
                if result.bind is not None and profile is not None:
                    scored = self.scored_nodes(profile, pod)
                    self.cache.assume(pod, result.bind.node)
                    assumed.append(pod.uid)
                results.append((pod, result, scored))
        finally:
            for uid in reversed(assumed):
                self.cache.forget(uid)
            self.rng.setstate(saved_rng)
        if gang and any(r.bind is None for _, r, _ in results):
            return [
                (
                    pod,
                    r
                    if r.bind is None
                    else ScheduleResult(
                        wait=WaitInfo(
                            summary="the gang does not fit as a whole",
                            reason_counts={},
                            failed_plugins=frozenset({"Gang"}),
                            total_nodes=self.table.n,
                        )
                    ),
                    s,
                )
                for pod, r, s in results
            ]
        return results
