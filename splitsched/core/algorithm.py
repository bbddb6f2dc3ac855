"""The scheduling algorithm: one pod through the framework against the cache's node table.

`schedule(pod, suggested_nodes)` returns exactly one of bind info (a node), preempt info
(victims) or wait info (why, per node): HiveD's algorithm contract (`seeds/000`), with the
results in `splitsched.core.results`. `assume` commits a choice (the cache, then Reserve and
Permit) and `forget` is the one way back (Unreserve, then the cache): the scheduler's state
calls it for every decision that does not end bound, gang rollback and what-if sessions use
it too, and nothing else forgets in the cache. Explain and Simulate run in a what-if session
(`what_if`, `splitsched.core.whatif`) that puts everything back. Used by the scheduler
service's loop, by `splitsched simulate` offline, and by the Explain/Simulate API. Pure: no
I/O, randomness from an injected RNG.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from splitsched.core import fit_error, framework, models, nominated_rooms, storage, whatif
from splitsched.core.cache import SchedulerCache
from splitsched.core.devices.model import ClaimWrite
from splitsched.core.filter_pass import run_filters
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from splitsched.core.nominated_rooms import NOMINATED_PODS
from splitsched.core.nominator import Nominator
from splitsched.core.observer import NO_OBSERVER, CycleObserver
from splitsched.core.results import (
    INVALID_POD,
    NO_NODES,
    NO_NODES_MESSAGE,
    NO_PROFILE,
    BindInfo,
    Explanation,
    PluginRejections,
    ScheduleResult,
    ScoredNodes,
    WaitInfo,
    format_summary,
    rejected_by_status,
    scheduler_error,
)
from splitsched.core.scorememo import RawScores, ScoreMemo


@dataclass(slots=True)
class _Reservation:
    """What `forget` needs to unreserve an assumed pod: the Reserve plugins that
    reserved it, in order, and the cycle they ran in."""

    state: framework.CycleState
    pod: models.Pod
    node: str
    plugins: list[framework.ReservePlugin] = field(default_factory=list)


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
        self._memo = ScoreMemo()
        # Assumed pods whose Reserve plugins ran, until bound (`confirm`) or `forget`.
        self._reservations: dict[str, _Reservation] = {}

    @property
    def table(self) -> NodeTable:
        return self.cache.table

    # ---- the cycle ---------------------------------------------------------------------
    def profile_for(self, pod: models.Pod) -> framework.Profile | None:
        """The pod's profile; without volumes or claims, less the plugins only they need."""
        profile = self.profiles.get(pod.scheduler_name)
        lean = profile is not None and not (pod.volumes or pod.resource_claims)
        return profile.without_volume_plugins() if lean and profile else profile

    def _reject_all(self, plugin: str, reasons: Sequence[str]) -> WaitInfo:
        n = self.table.n
        counts = {r: n for r in reasons} if n else {}
        summary = format_summary(n, counts)
        if n == 0 or plugin in (INVALID_POD, NO_PROFILE):
            summary = f"{summary[:-1]}: {'; '.join(reasons)}." if n == 0 else summary
        summary = NO_NODES_MESSAGE if plugin == NO_NODES else summary  # kube's, word for word
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
    ) -> framework.Status | None:
        """Run PreFilter; the status of the plugin that rejects the pod outright, or None.
        A plugin that names the only nodes worth filtering narrows `state.node_subset`; if
        the named sets share no node, that rejects the pod (in kube-scheduler's words)."""
        for p in profile.pre_filter:
            status = p.pre_filter(state, pod, self.table)
            if status.code is framework.Code.SKIP:
                state.skip_filter.add(p.name)
            elif not status.ok:
                return dataclasses.replace(status, plugin=p.name)
            elif status.node_names is not None:
                subset = state.node_subset
                state.node_subset = subset = (
                    framework.NodeSubset(status.node_names, (p.name,))
                    if subset is None
                    else subset.narrowed(p.name, status.node_names)
                )
                if not subset.names:
                    return framework.Status.unschedulable(
                        subset.empty_reason, plugin=p.name, resolvable=False
                    )
        return None

    def _pre_filter_wait(self, status: framework.Status) -> WaitInfo:
        """kube-scheduler's FitError names a PreFilter rejection once, not per node."""
        reasons = status.reasons or (f"rejected by {status.plugin}",)
        summary = f"0/{self.table.n} nodes are available: {', '.join(reasons)}."
        return dataclasses.replace(self._reject_all(status.plugin, reasons), summary=summary)

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
        (-1 where feasible; past the filters' indexes, `fit_error`'s marks say why a row no
        filter rejected is not feasible)."""
        n = self.table.n
        past = len(profile.filter)
        mask = np.ones(n, dtype=np.bool_) if suggested is None else suggested.copy()
        rejected_by = np.full(n, -1, dtype=np.int64)
        if suggested is not None:
            rejected_by[~suggested] = past + fit_error.NOT_SUGGESTED
        filters: Sequence[framework.FilterPlugin] = profile.filter
        if state.node_subset is not None:
            named = self._rows_named(state.node_subset.names)
            rejected_by[~named] = past + fit_error.LEFT_OUT
            mask &= named
            filters = filters if mask.any() else ()
        run_filters(filters, state, pod, self.table, mask, rejected_by)
        if nominated and self.nominator and mask.any():
            self._keep_nominated_rooms(profile, pod, mask, rejected_by)
        return mask, rejected_by

    def _rows_named(self, names: Iterable[str]) -> BoolArray:
        """The rows of these node names (names of no node are ignored, as kube does)."""
        mask = np.zeros(self.table.n, dtype=np.bool_)
        for name in names:
            row = self.table.row_of.get(name)
            if row is not None:
                mask[row] = True
        return mask

    # ---- rooms held for nominated pods ---------------------------------------------------
    def _surely_fitting_dropped(
        self, pod: models.Pod, held: nominated_rooms.Held
    ) -> nominated_rooms.Held:
        """The held rows where the pod might not fit beside its nominees
        (`nominated_rooms.surely_fitting_dropped`)."""
        return nominated_rooms.surely_fitting_dropped(self.nominator, self.table, pod, held)

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
        rooms = nominated_rooms.held_rooms(self.nominator, self.cache, pod, mask)
        held = self._surely_fitting_dropped(pod, rooms)
        if not held:
            return
        with nominated_rooms.counting(self.table, held):
            again = self._filter_afresh(profile, pod)
        rows = np.fromiter(held, dtype=np.int64, count=len(held))
        lost = rows if again is None else rows[~again[0][rows]]
        if lost.size:
            mask[lost] = False
            rejected_by[lost] = len(profile.filter) + fit_error.HELD_ROOM

    def nominated_rejections(
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
        return nominated_rooms.held_room_reasons(
            nominator=self.nominator, cache=self.cache, profile=profile, pod=pod, rows=rows,
            refilter=self._filter_afresh,
        )  # fmt: skip

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
            elif status.code is framework.Code.ERROR:
                error = f'running PreScore plugin "{pre.name}": {"; ".join(status.reasons)}'
                return ScoredNodes(rows=rows, total=total, per_plugin={}, error=error)
        active = [e for e in profile.score if e.plugin.name not in state.skip_score]
        memo = self._score_memo(profile, state, pod, active)
        for entry in active:
            plugin = entry.plugin
            if memo is not None and plugin.name in memo.raw:
                raw = np.take(memo.raw[plugin.name], rows)  # a third faster than [rows]
            else:
                raw = plugin.score(state, pod, self.table, rows)
            normalised = plugin.normalize(state, pod, np.asarray(raw, dtype=np.float64))
            per_plugin[plugin.name] = normalised
            total += normalised if entry.weight == 1 else entry.weight * normalised
        return ScoredNodes(rows=rows, total=total, per_plugin=per_plugin)

    def _score_memo(
        self,
        profile: framework.Profile,
        state: framework.CycleState,
        pod: models.Pod,
        active: Sequence[framework.ScoreEntry],
    ) -> RawScores | None:
        """Raw scores of row-local plugins over every row, kept up to date incrementally
        (`splitsched.core.scorememo`); None when some active plugin is not row-local."""
        return self._memo.raw_scores(self.table, profile, state, pod, active)

    def _select(self, scored: ScoredNodes) -> int:
        best = np.flatnonzero(scored.total >= scored.total.max() - 1e-9)
        if best.size == 1:
            return int(best[0])
        return int(best[self.rng.randrange(best.size)])

    def _suggested_mask(self, suggested_nodes: Sequence[str] | None) -> BoolArray | None:
        return None if suggested_nodes is None else self._rows_named(suggested_nodes)

    def schedule(
        self, pod: models.Pod, suggested_nodes: Sequence[str] | None = None
    ) -> ScheduleResult:
        """One scheduling cycle without side effects on the cache (see `assume`)."""
        self.observer.schedule_started(pod)
        result = self.run_cycle(pod, suggested_nodes)
        self.observer.schedule_finished(pod, result)
        return result

    def run_cycle(
        self, pod: models.Pod, suggested_nodes: Sequence[str] | None = None
    ) -> ScheduleResult:
        """`schedule` without telling the observer: Explain's summary is what it answers."""
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
            every = range(self.table.n) if rejected.code is framework.Code.UNSCHEDULABLE else ()
            return fit_error.post_filter(
                table=self.table, profile=profile, state=state, pod=pod,
                wait=self._pre_filter_wait(rejected), candidates=every,
                misfit=self._misfit(profile, pod),
            )  # fmt: skip
        mask, rejected_by = self._filter(profile, state, pod, self._suggested_mask(suggested_nodes))
        feasible = np.flatnonzero(mask)
        if feasible.size == 0 and state.filter_error is not None:  # kube: no PostFilter
            return ScheduleResult(wait=scheduler_error(*state.filter_error, self.table.n))
        if feasible.size == 0:
            why = self._rejections(profile, state, pod, rejected_by)
            return fit_error.post_filter(
                table=self.table, profile=profile, state=state, pod=pod, wait=why.wait(),
                candidates=why.preemption_candidates(), misfit=self._misfit(profile, pod),
            )  # fmt: skip
        if feasible.size == 1:
            node = self.table.names[int(feasible[0])]
            return ScheduleResult(bind=BindInfo(node, 0.0, 1), state=state)
        self.observer.score_started(pod)
        scored = self.score(profile, state, pod, feasible)
        self.observer.score_finished(pod)
        if scored.error:
            wait = scheduler_error("PreScore", scored.error, self.table.n)
            return ScheduleResult(wait=wait, state=state)
        pick = self._select(scored)
        node = self.table.names[int(feasible[pick])]
        return ScheduleResult(
            bind=BindInfo(node, float(scored.total[pick]), int(feasible.size)), state=state
        )

    # ---- when no node fits ---------------------------------------------------------------
    def _misfit(self, profile: framework.Profile, pod: models.Pod) -> framework.Misfit:
        """`framework.Misfit` for PostFilter what-ifs: PreFilter and Filter afresh (rooms
        held for nominated pods counted), then the first rejecting plugin's reasons."""

        def misfit(row: int) -> tuple[str, ...]:
            fresh = framework.CycleState()
            rejected = self._pre_filter(profile, fresh, pod)
            if rejected is not None:
                return rejected.reasons or (f"rejected by {rejected.plugin}",)
            mask, rejected_by = self._filter(profile, fresh, pod, None)
            if mask[row]:
                return ()
            return self._rejections(profile, fresh, pod, rejected_by).reasons_of(row)

        return misfit

    def _rejections(
        self,
        profile: framework.Profile,
        state: framework.CycleState,
        pod: models.Pod,
        rejected_by: IntArray,
    ) -> fit_error.Rejections:
        held = functools.partial(self._held_room_reasons, profile, pod)
        return fit_error.Rejections(self.table, profile, state, pod, rejected_by, held)

    def scored_nodes(self, profile: framework.Profile, pod: models.Pod) -> ScoredNodes | None:
        """Scores of every feasible node (for Simulate's top nodes); None if none fits."""
        state = framework.CycleState()
        if self._pre_filter(profile, state, pod) is not None:
            return None
        mask, _ = self._filter(profile, state, pod, None)
        rows = np.flatnonzero(mask)
        scored = self.score(profile, state, pod, rows) if rows.size else None
        return None if scored is None or scored.error else scored

    # ---- committing a decision, and the one way back -------------------------------------
    def assume(
        self, pod: models.Pod, node: str, state: framework.CycleState | None = None
    ) -> framework.Status:
        """Assume the pod on the node in the cache, then run Reserve and Permit. On any
        rejection `forget` undoes everything and the status says why. This scheduler holds
        no pods waiting on Permit (kube-scheduler's WaitOnPermit): a WAIT is a wait that
        times out at once, undone like a rejection."""
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
        for plugin in profile.reserve:
            status = plugin.reserve(state, pod, node)
            if status.code is framework.Code.SKIP:
                continue  # nothing reserved: nothing to keep for Unreserve
            if not status.ok:
                self.forget(pod.uid)
                return status
            held = self._reservations.get(pod.uid)
            if held is None:
                held = self._reservations[pod.uid] = _Reservation(state, pod, node)
            held.plugins.append(plugin)
        for permit in profile.permit:
            status = permit.permit(state, pod, node)
            if not status.ok:
                self.forget(pod.uid)
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
                blocked = rejected_by_status(status, self.table.n)
            else:
                # Preemption is not attempted for gangs: the whole gang would need room.
                blocked = result.wait if result.wait is not None else result.preempt.wait  # type: ignore[union-attr]
            for done, _ in reversed(placed):
                self.forget(done.uid)
            return [], pod, blocked
        return placed, None, None

    def forget(self, uid: str) -> bool:
        """Undo `assume` (kube-scheduler's failure handler: Unreserve, then ForgetPod): the
        Reserve plugins that reserved the pod unreserve it, newest first, then the cache
        forgets it. The one undo path: every decision that does not end bound, gang
        rollback and what-if sessions come through here. False when the cache did not hold
        the pod (it may still have been unreserved: an assumption lost with a fresh view)."""
        reservation = self._reservations.pop(uid, None)
        if reservation is not None:
            for plugin in reversed(reservation.plugins):
                plugin.unreserve(reservation.state, reservation.pod, reservation.node)
        return self.cache.forget(uid)

    def prebind_volumes(self, uid: str) -> tuple[storage.VolumeBinding, ...]:
        """The binder's volume writes for the assumed pod (`framework.PREBIND_VOLUMES`)."""
        held = self._reservations.get(uid)
        return (held.state.read(framework.PREBIND_VOLUMES) or ()) if held else ()

    def prebind_claims(self, uid: str) -> tuple[ClaimWrite, ...]:
        """The binder's ResourceClaim writes for the assumed pod (`framework.PREBIND_CLAIMS`)."""
        held = self._reservations.get(uid)
        return (held.state.read(framework.PREBIND_CLAIMS) or ()) if held else ()

    def confirm(self, uid: str) -> None:
        """The pod is bound: its reservation stands for good, never to be unreserved."""
        self._reservations.pop(uid, None)

    # ---- explain and what-if -----------------------------------------------------------
    def what_if(self) -> contextlib.AbstractContextManager[whatif.WhatIf]:
        """A what-if session on the live view: place pods, explain, and on exit everything
        is put back (Unreserve included), also when the block raises."""
        return whatif.session(self)

    def explain(self, pod: models.Pod) -> Explanation:
        """Run every filter on every node and keep all rejections (an Explain call)."""
        with self.what_if() as view:
            return view.explain(pod)

    def simulate(self, pods: Iterable[models.Pod], *, gang: bool = False) -> list[whatif.Placement]:
        """Place pods one after another as the scheduler would, each seeing the ones before
        it, then undo every placement: the view is left exactly as it was. With `gang`, a
        pod that fits nowhere makes the whole group unplaced."""
        return whatif.simulate(self, pods, gang=gang)
