"""The scheduling queue: which pending pod the scheduler tries next, and when to retry.

kube-scheduler's PriorityQueue (pkg/scheduler/backend/queue), without goroutines or locks:
the scheduler service calls `add`/`update`/`delete` for watched pending pods, `pop` in its
scheduling loop (wrapping it with an asyncio event, since `pop` never blocks), gives each
popped pod back through `add_unschedulable`, `add_backoff` or `done`, forwards cluster
events to `on_event`, and calls `flush` every second.

Every tracked pod is in exactly one place:
- active: ready to try, highest `pod.priority` first, then earliest arrival (FIFO);
- backoff: waiting out `initial_backoff * 2**(attempts-1)` (capped) after a failure;
- unschedulable: rejected by plugins, parked until a cluster event that one of those plugins
  cares about arrives, or until `max_unschedulable_duration` passes;
- in flight: popped and being scheduled;
- gated: its `scheduling_gates` are not all removed yet (kube-scheduler's PreEnqueue
  SchedulingGates plugin keeps it out of every queue it pops from). Never popped and never
  moved by cluster events or timeouts: only an update without gates sends it to active.

Arrival is a sequence number taken whenever kube-scheduler would refresh the pod's queue
timestamp (first add, and each return after a failed attempt), so ordering is
deterministic and ties are FIFO. Heaps use lazy deletion: stale heap items are skipped
when they surface and the heaps are rebuilt when mostly stale.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from splitsched.core import models
from splitsched.core.clock import Clock
from splitsched.core.framework import ClusterEvent

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
IN_FLIGHT = "in_flight"
GATED = "gated"
DROPPED = "dropped"
_PLACES = (ACTIVE, BACKOFF, UNSCHEDULABLE, IN_FLIGHT, GATED)


class QueueError(Exception):
    """A call that the pod's place in the queue does not allow (nothing was changed)."""


@dataclass(frozen=True, slots=True)
class QueuedPod:
    """A snapshot of a queued pod. `attempts` counts pops; `enqueued_at` is the time of the
    last (re)queueing after an attempt, from which backoff and the unschedulable timeout
    run; `activated_at` the time it last entered active, where its wait for the scheduler
    (not for backoff, room or a gate) starts: the next attempt's trace starts there."""

    pod: models.Pod
    attempts: int = 0
    first_enqueued: float = 0.0
    enqueued_at: float = 0.0
    unschedulable_plugins: frozenset[str] = frozenset()
    activated_at: float = 0.0

    @property
    def uid(self) -> str:
        return self.pod.uid


class _Entry:
    """The queue's mutable record of one pod."""

    __slots__ = (
        "activated_at",
        "attempts",
        "backoff_expiry",
        "enqueued_at",
        "events",
        "first_enqueued",
        "flight_events",
        "flight_pod_changed",
        "place",
        "plugins",
        "pod",
        "seq",
        "token",
    )

    def __init__(self, pod: models.Pod, *, now: float, seq: int) -> None:
        self.pod = pod
        self.attempts = 0
        self.first_enqueued = now
        self.enqueued_at = now
        self.activated_at = now
        self.plugins: frozenset[str] = frozenset()
        self.events: frozenset[ClusterEvent] = frozenset()
        self.place = ""
        self.seq = seq
        self.token = 0
        self.backoff_expiry = now
        self.flight_events: set[ClusterEvent] = set()
        self.flight_pod_changed = False

    def snapshot(self) -> QueuedPod:
        return QueuedPod(
            pod=self.pod,
            attempts=self.attempts,
            first_enqueued=self.first_enqueued,
            enqueued_at=self.enqueued_at,
            unschedulable_plugins=self.plugins,
            activated_at=self.activated_at,
        )


def _scheduling_spec_changed(old: models.Pod, new: models.Pod) -> bool:
    """kube-scheduler's isPodUpdated: a change other than resourceVersion and status may
    make an unschedulable pod schedulable."""
    comparable = dataclasses.replace(
        old,
        resource_version=new.resource_version,
        phase=new.phase,
        nominated_node_name=new.nominated_node_name,
    )
    return comparable != new


class SchedulingQueue:
    """Active heap + backoff heap + unschedulable pool + in-flight set, keyed by pod uid."""

    def __init__(
        self,
        *,
        clock: Clock,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable_duration: float = 300.0,
    ) -> None:
        if initial_backoff < 0 or max_backoff < initial_backoff:
            raise ValueError("need 0 <= initial_backoff <= max_backoff")
        self._clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable_duration = max_unschedulable_duration
        self._entries: dict[str, _Entry] = {}
        self._counts = dict.fromkeys(_PLACES, 0)
        self._seq = 0
        self._token = 0
        # (-priority, seq, token, uid)
        self._active: list[tuple[int, int, int, str]] = []
        # (backoff expiry, seq, token, uid)
        self._backoff: list[tuple[float, int, int, str]] = []
        # (enqueued_at, seq, token, uid): oldest first, for the unschedulable timeout
        self._unsched: list[tuple[float, int, int, str]] = []
        self._by_event: dict[ClusterEvent, set[str]] = {}
        self._in_flight: dict[str, _Entry] = {}
        # Pods deleted while in flight: their requeue is dropped instead of reviving them.
        self._deleted_in_flight: set[str] = set()

    # ---- bookkeeping ---------------------------------------------------------------------
    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _next_token(self) -> int:
        self._token += 1
        return self._token

    def _leave(self, entry: _Entry) -> None:
        """Take the entry out of its current place (heap items become stale)."""
        uid = entry.pod.uid
        if entry.place == UNSCHEDULABLE:
            for event in entry.events:
                waiting = self._by_event.get(event)
                if waiting is not None:
                    waiting.discard(uid)
                    if not waiting:
                        del self._by_event[event]
        elif entry.place == IN_FLIGHT:
            self._in_flight.pop(uid, None)
        if entry.place:
            self._counts[entry.place] -= 1
        entry.place = ""
        entry.token = self._next_token()

    def _push_active(self, entry: _Entry, now: float) -> None:
        """Into active, entered at `now` (a re-sort in place passes its `activated_at`)."""
        self._leave(entry)
        entry.activated_at = now
        entry.place = ACTIVE
        self._counts[ACTIVE] += 1
        heapq.heappush(self._active, (-entry.pod.priority, entry.seq, entry.token, entry.pod.uid))
        self._maybe_compact()

    def _push_backoff(self, entry: _Entry) -> None:
        self._leave(entry)
        entry.place = BACKOFF
        self._counts[BACKOFF] += 1
        heapq.heappush(self._backoff, (entry.backoff_expiry, entry.seq, entry.token, entry.pod.uid))
        self._maybe_compact()

    def _push_unschedulable(self, entry: _Entry) -> None:
        self._leave(entry)
        entry.place = UNSCHEDULABLE
        self._counts[UNSCHEDULABLE] += 1
        uid = entry.pod.uid
        for event in entry.events:
            self._by_event.setdefault(event, set()).add(uid)
        heapq.heappush(self._unsched, (entry.enqueued_at, entry.seq, entry.token, uid))
        self._maybe_compact()

    def _set_in_flight(self, entry: _Entry) -> None:
        self._leave(entry)
        entry.place = IN_FLIGHT
        self._counts[IN_FLIGHT] += 1
        entry.flight_events = set()
        entry.flight_pod_changed = False
        self._in_flight[entry.pod.uid] = entry

    def _set_gated(self, entry: _Entry) -> str:
        """Out of every queue until its gates are removed (no heap item, no event)."""
        self._leave(entry)
        entry.place = GATED
        self._counts[GATED] += 1
        return GATED

    def _live(self, place: str, token: int, uid: str) -> _Entry | None:
        entry = self._entries.get(uid)
        if entry is None or entry.place != place or entry.token != token:
            return None
        return entry

    def _maybe_compact(self) -> None:
        """Rebuild a heap once stale items outnumber live ones (updates, deletes, moves)."""
        if len(self._active) > 2 * self._counts[ACTIVE] + 64:
            self._active = [i for i in self._active if self._live(ACTIVE, i[2], i[3])]
            heapq.heapify(self._active)
        if len(self._backoff) > 2 * self._counts[BACKOFF] + 64:
            self._backoff = [i for i in self._backoff if self._live(BACKOFF, i[2], i[3])]
            heapq.heapify(self._backoff)
        if len(self._unsched) > 2 * self._counts[UNSCHEDULABLE] + 64:
            self._unsched = [i for i in self._unsched if self._live(UNSCHEDULABLE, i[2], i[3])]
            heapq.heapify(self._unsched)

    def backoff_duration(self, attempts: int) -> float:
        """initial * 2**(attempts-1), capped at max; no penalty before the first attempt
        (kube-scheduler's calculateBackoffDuration)."""
        if attempts <= 0:
            return 0.0
        duration = self.initial_backoff
        for _ in range(1, attempts):
            if duration > self.max_backoff - duration:
                return self.max_backoff
            duration += duration
        return duration

    def _requeue(self, entry: _Entry, now: float) -> str:
        """To backoff if the pod is still backing off, else straight to active
        (kube-scheduler's requeuePodWithQueueingStrategy for queueAfterBackoff)."""
        if entry.backoff_expiry > now:
            self._push_backoff(entry)
            return BACKOFF
        self._push_active(entry, now)
        return ACTIVE

    # ---- pending pods from the watch -----------------------------------------------------
    def add(self, pod: models.Pod) -> None:
        """A new pending pod: straight to active, or gated while it has scheduling gates.
        A pod already tracked is updated."""
        if pod.uid in self._entries:
            self.update(pod)
            return
        self._deleted_in_flight.discard(pod.uid)
        now = self._clock.now()
        entry = _Entry(pod, now=now, seq=self._next_seq())
        self._entries[pod.uid] = entry
        if pod.scheduling_gates:
            self._set_gated(entry)
        else:
            self._push_active(entry, now)

    def update(self, pod: models.Pod) -> None:
        """Replace the pod wherever it is. In active or backoff it keeps its place (active
        re-sorts on a priority change); in the unschedulable pool a change that may affect
        scheduling moves it out to backoff or active; in flight the change is remembered so
        a rejection sends it to backoff rather than the pool. Unknown pods are added."""
        entry = self._entries.get(pod.uid)
        if entry is None:
            self.add(pod)
            return
        old = entry.pod
        entry.pod = pod
        if entry.place == GATED or pod.scheduling_gates:
            self._update_gated(entry)
        elif entry.place == ACTIVE:
            if old.priority != pod.priority:
                self._push_active(entry, entry.activated_at)
        elif entry.place == UNSCHEDULABLE:
            if _scheduling_spec_changed(old, pod):
                self._requeue(entry, self._clock.now())
        elif entry.place == IN_FLIGHT and _scheduling_spec_changed(old, pod):
            entry.flight_pod_changed = True

    def _update_gated(self, entry: _Entry) -> None:
        """A gated pod whose last gate was removed goes to active (kube-scheduler's
        SchedulingGates queueing hint: Queue; it has no backoff to serve, and keeps its
        place in line from when it was added). A tracked pod that gained gates (the API
        server forbids it) is gated, or on its return if in flight."""
        if entry.place == IN_FLIGHT:
            entry.flight_pod_changed = True
        elif entry.pod.scheduling_gates:
            if entry.place != GATED:
                self._set_gated(entry)
        else:
            self._requeue(entry, self._clock.now())

    def delete(self, uid: str) -> bool:
        """The pod was deleted or got assigned by someone else: stop tracking it. A pod in
        flight is forgotten and its later requeue ignored. False if unknown."""
        entry = self._entries.pop(uid, None)
        if entry is None:
            return False
        if entry.place == IN_FLIGHT:
            self._deleted_in_flight.add(uid)
        self._leave(entry)
        self._maybe_compact()
        return True

    # ---- the scheduling loop -------------------------------------------------------------
    def pop(self) -> QueuedPod | None:
        """The next pod to schedule, or None if active is empty. The pod is in flight until
        `add_unschedulable`, `add_backoff` or `done`."""
        while self._active:
            _, _, token, uid = heapq.heappop(self._active)
            entry = self._live(ACTIVE, token, uid)
            if entry is None:
                continue
            entry.attempts += 1
            self._set_in_flight(entry)
            return entry.snapshot()
        return None

    def _take_back(self, qp: QueuedPod) -> _Entry | None:
        """The entry of a pod coming back from a scheduling attempt; None if it was deleted
        meanwhile. A pod already `done` (e.g. its bind failed after it was assumed) is
        tracked again from the snapshot."""
        uid = qp.pod.uid
        if uid in self._deleted_in_flight:
            self._deleted_in_flight.discard(uid)
            return None
        entry = self._entries.get(uid)
        if entry is None:
            entry = _Entry(qp.pod, now=qp.first_enqueued, seq=0)
            entry.attempts = qp.attempts
            self._entries[uid] = entry
            return entry
        if entry.place != IN_FLIGHT:
            raise QueueError(f"pod {qp.pod.key} ({uid}) is already in the {entry.place} queue")
        return entry

    def _take_back_failed(
        self,
        qp: QueuedPod,
        *,
        plugins: frozenset[str],
        events: frozenset[ClusterEvent],
    ) -> _Entry | None:
        """`_take_back` for a failed attempt, the entry stamped for its wait: enqueued now,
        a fresh place in line, the plugins that rejected it and the events that may help,
        and when its backoff ends."""
        entry = self._take_back(qp)
        if entry is None:
            return None
        now = self._clock.now()
        entry.enqueued_at = now
        entry.seq = self._next_seq()
        entry.plugins = plugins
        entry.events = events
        entry.backoff_expiry = now + self.backoff_duration(entry.attempts)
        return entry

    def add_unschedulable(
        self,
        qp: QueuedPod,
        *,
        plugins: frozenset[str],
        events: frozenset[ClusterEvent],
    ) -> str:
        """A pod the plugins rejected. Parked in the unschedulable pool until one of `events`
        arrives, unless such an event (or a change to the pod itself) already arrived while
        it was in flight, or no plugin was named: then backoff, so it is not stranded
        (kube-scheduler's in-flight events / moveRequestCycle). Returns where it went."""
        entry = self._take_back_failed(qp, plugins=plugins, events=events)
        if entry is None:
            return DROPPED
        if entry.pod.scheduling_gates:
            return self._set_gated(entry)
        if not plugins or entry.flight_pod_changed or (entry.flight_events & events):
            return self._requeue(entry, entry.enqueued_at)
        self._push_unschedulable(entry)
        return UNSCHEDULABLE

    def add_backoff(self, qp: QueuedPod) -> str:
        """A pod that failed for another reason than plugins rejecting it (an error, a bind
        failure): retry after its backoff. Returns where it went."""
        entry = self._take_back_failed(qp, plugins=frozenset(), events=frozenset())
        if entry is None:
            return DROPPED
        if entry.pod.scheduling_gates:
            return self._set_gated(entry)
        return self._requeue(entry, entry.enqueued_at)

    def done(self, uid: str) -> bool:
        """The in-flight pod was assumed (or otherwise settled): stop tracking it."""
        self._deleted_in_flight.discard(uid)
        entry = self._in_flight.get(uid)
        if entry is None:
            return False
        self._leave(entry)
        del self._entries[uid]
        return True

    # ---- cluster events and time ---------------------------------------------------------
    def on_event(
        self, event: ClusterEvent, wakes: Callable[[models.Pod], bool] | None = None
    ) -> int:
        """Move unschedulable pods that wait for this event to active (or backoff if still
        backing off); remember it for pods in flight. With `wakes` (kube's queueing hint
        for this one event), only the waiting pods it says yes to move; the others keep
        waiting for it. Returns how many pods moved."""
        for entry in self._in_flight.values():
            entry.flight_events.add(event)
        if wakes is None:
            waiting = self._by_event.pop(event, None)
        else:
            waiting = {u for u in self._by_event.get(event, ()) if wakes(self._entries[u].pod)}
        if not waiting:
            return 0
        now = self._clock.now()
        movers = sorted((self._entries[uid] for uid in waiting), key=lambda e: e.seq)
        for entry in movers:
            self._requeue(entry, now)
        return len(movers)

    def flush(self, now: float | None = None) -> int:
        """Backoff pods whose backoff expired go to active; pods parked as unschedulable for
        longer than `max_unschedulable_duration` go to active or backoff (kube-scheduler's
        flushBackoffQCompleted and flushUnschedulablePodsLeftover). Returns how many moved."""
        if now is None:
            now = self._clock.now()
        moved = 0
        while self._backoff and self._backoff[0][0] <= now:
            _, _, token, uid = heapq.heappop(self._backoff)
            entry = self._live(BACKOFF, token, uid)
            if entry is not None:
                self._push_active(entry, now)
                moved += 1
        deadline = now - self.max_unschedulable_duration
        while self._unsched and self._unsched[0][0] < deadline:
            _, _, token, uid = heapq.heappop(self._unsched)
            entry = self._live(UNSCHEDULABLE, token, uid)
            if entry is not None:
                self._requeue(entry, now)
                moved += 1
        return moved

    # ---- queries -------------------------------------------------------------------------
    def lengths(self) -> dict[str, int]:
        return dict(self._counts)

    def get(self, uid: str) -> QueuedPod | None:
        entry = self._entries.get(uid)
        return entry.snapshot() if entry is not None else None

    def place_of(self, uid: str) -> str | None:
        """ "active", "backoff", "unschedulable", "in_flight", "gated", or None if not
        tracked."""
        entry = self._entries.get(uid)
        return entry.place if entry is not None else None

    def __contains__(self, uid: object) -> bool:
        return uid in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def pending_pods(self) -> Iterator[QueuedPod]:
        """Pods waiting in active, backoff or the unschedulable pool: not those in flight,
        nor the gated ones, which cannot be placed yet (kube-scheduler's PendingPods lists
        those too)."""
        for entry in list(self._entries.values()):
            if entry.place != IN_FLIGHT and entry.place != GATED:
                yield entry.snapshot()
