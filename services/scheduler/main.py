"""splitsched-scheduler: the stateful service that holds the cluster view and decides.

Subscribes to a watcher's event stream (reconnecting with backoff, resuming from the last
applied sequence), runs the scheduling loop one pod at a time through the pure core, sends
decisions to binders (client-side round robin), and serves the Scheduler API. Holds no
Kubernetes credentials, except, with `--leader-elect`, the right to its Lease
(`services.scheduler.leader`): then only the replica holding it schedules, and a standby
keeps a warm view, reports not ready and refuses binders' reports. When it starts
leading, it waits `--settle-seconds` (3 s by default with leader election) after its view
is synced and binders can reach it, before deciding anything, so binders' re-reports of
the decisions still in flight are adopted first.

This module wires the parts together and holds the probes, and the runtime's service
skeleton (`splitsched.runtime.service`) runs them: servers, signals, the order of
shutdown. Its flags and settings: `services.scheduler.settings`. Each job has its own
module: `ingest` (the watch), `loops` (scheduling and housekeeping), `dispatch` (the
binder client and probe), `leadership` (the Lease, settling, gRPC health), `metrics`,
`state` (the decisions) and `api` (the Scheduler API).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from services.scheduler import leader
from services.scheduler.api import SchedulerApi
from services.scheduler.attempts import AttemptStore
from services.scheduler.dispatch import BinderDispatch
from services.scheduler.ingest import WatchIngest
from services.scheduler.leadership import Leadership
from services.scheduler.loops import SchedulingLoop
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.settings import TRACE_STORE_PODS, SchedulerSettings
from services.scheduler.state import DecisionEvent, Listener, SchedulerState
from services.scheduler.traces import SchedulingTraces
from splitsched.core import algorithm, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import SystemClock
from splitsched.core.observer import NO_OBSERVER
from splitsched.core.queue import SchedulingQueue
from splitsched.runtime import kubeclient, service, tasksgauge, tracing
from splitsched.v1 import scheduler_pb2_grpc

log = logging.getLogger("splitsched.scheduler")
#: Seconds the gRPC server lets calls in progress finish on shutdown.
GRPC_GRACE_SECONDS = 2.0


class SchedulerService:
    """One scheduler process as the service skeleton drives it: the state, built here,
    and the jobs around it (the watch, the loops, the binders, the Lease and the API),
    built in `open` because their channels and clients bind to the event loop."""

    def __init__(
        self, settings: SchedulerSettings, *, attempt_store: AttemptStore | None = None
    ) -> None:
        self.settings = settings
        #: The pods' last attempts for GetPodTrace (None: not kept; `serve` makes one).
        self.attempt_store = attempt_store
        text = Path(settings.profiles).read_text(encoding="utf-8") if settings.profiles else ""
        config = profiles.load_yaml(text)
        for note in config.notes:
            log.warning("scheduler config: %s", note)
        clock = SystemClock()
        # Tracing off: None, the core's observer does nothing and the loops skip every
        # tracing step.
        self.traces: SchedulingTraces | None = None
        if tracing.enabled():
            self.traces = SchedulingTraces(queued_of=lambda uid: self.state.queue.get(uid))
        algo = algorithm.FrameworkAlgorithm(
            cache=SchedulerCache(clock=clock),
            profiles=config.profiles,
            observer=self.traces or NO_OBSERVER,
        )
        self.state = SchedulerState(
            algo=algo,
            queue=SchedulingQueue(
                clock=clock,
                initial_backoff=config.pod_initial_backoff_seconds,
                max_backoff=config.pod_max_backoff_seconds,
            ),
            clock=clock,
            scheduler_id=settings.scheduler_id,
            bind_timeout=settings.bind_timeout,
            volume_bind_timeout=_volume_bind_timeout(settings, config),
            max_in_flight=settings.max_decisions_in_flight,
            leading=not settings.leader_elect,
            # Unique per process: a restarted scheduler must not reuse a decision id that a
            # binder still remembers (it would answer with the old decision's outcome).
            decision_prefix=f"{settings.scheduler_id}.{secrets.token_hex(3)}",
        )
        self.metrics = SchedulerMetrics()
        tasksgauge.register(self.metrics.registry)
        trace_id_of = self.traces.trace_id if self.traces is not None else None
        self.state.listeners.append(self.metrics.decision_listener(self.state, trace_id_of))
        if self.traces is not None:
            self.state.listeners.append(_trace_outcomes(self.traces))
        if log.isEnabledFor(logging.DEBUG):
            self.state.listeners.append(_log_decision_event)
        self.wake = asyncio.Event()
        #: Set when the service stops: the loops end.
        self.stopping = asyncio.Event()
        self.binders_ok = False
        self.tasks: list[asyncio.Task[None]] = []
        self._running: service.Running | None = None
        self._parts: _Parts | None = None

    @property
    def dispatch(self) -> BinderDispatch:
        return self._opened().dispatch

    @property
    def leadership(self) -> Leadership:
        return self._opened().leadership

    def _opened(self) -> _Parts:
        assert self._parts is not None, "open() first"
        return self._parts

    def poke(self) -> None:
        """Wake the scheduling loop: something it waits for may have changed."""
        self.wake.set()

    # ---- probes --------------------------------------------------------------------------
    def ready(self) -> bool:
        """/readyz: leading, a synced view of the cluster and at least one binder SERVING
        (a standby is not ready, so a Service sends binders and tools to the leader; with
        `--standby-ready` it is, for Deployments whose rollouts wait for readiness, and
        only gRPC health tells the leader apart)."""
        leading = self.state.leading or self.settings.standby_ready
        return leading and self.state.synced and self.binders_ok

    async def binder_probe_loop(self) -> None:
        """Keep `binders_ok` (what readiness reads) in line with the binders' gRPC health."""
        await self.dispatch.probe_loop(self.stopping, on_result=self._binders_answered)

    def _binders_answered(self, ok: bool) -> None:
        self.binders_ok = ok

    # ---- the service skeleton's steps ----------------------------------------------------
    async def open(self) -> service.Exposed:
        """The jobs around the state, and the Scheduler API (NOT_SERVING until leadership
        says otherwise). An unusable kubeconfig for the Lease fails here (exit 2)."""
        self._parts = self._build_parts(self._elector())
        api = SchedulerApi(
            state=self.state,
            on_change=self.poke,
            trace_id_of=self.traces.trace_id if self.traces is not None else None,
            attempts=self.attempt_store,
        )
        return service.Exposed(
            servicers=[(scheduler_pb2_grpc.add_SchedulerServicer_to_server, api)],
            service_names=["splitsched.v1.Scheduler"],
            metrics=self.metrics.registry,
            ready=self.ready,
            grace=GRPC_GRACE_SECONDS,
        )

    def _build_parts(self, elector: leader.LeaderElector | None) -> _Parts:
        """The jobs around the state, each in its own module."""
        settings, peer_tls = self.settings, self.settings.common.security.peer
        leadership = Leadership(
            state=self.state,
            metrics=self.metrics,
            elector=elector,
            settle_seconds=settings.settle_seconds,
            poke=self.poke,
            stop=self._stop,
        )
        dispatch = BinderDispatch(
            state=self.state,
            metrics=self.metrics,
            target=settings.binders,
            tls=peer_tls,
            bind_attempts=settings.bind_attempts,
            bind_timeout=settings.bind_timeout,
            poke=self.poke,
            traces=self.traces,
        )
        self.metrics.binder_calls.set_function(lambda: len(dispatch.inflight))
        self.metrics.decisions_in_flight.set_function(lambda: len(self.state.decisions))
        self.metrics.flow_window.set_function(lambda: self.state.flow.size)
        ingest = WatchIngest(
            state=self.state,
            metrics=self.metrics,
            target=settings.watcher,
            subscriber=settings.scheduler_id,
            tls=peer_tls,
            poke=self.poke,
            stopping=self.stopping,
            traces=self.traces,
        )
        scheduling = SchedulingLoop(
            state=self.state,
            metrics=self.metrics,
            dispatch=dispatch,
            leadership=leadership,
            wake=self.wake,
            stopping=self.stopping,
            poke=self.poke,
            traces=self.traces,
        )
        return _Parts(leadership, dispatch, ingest, scheduling)

    def _elector(self) -> leader.LeaderElector | None:
        """The Lease's elector with `--leader-elect`, else None (this replica always leads)."""
        s = self.settings
        if not s.leader_elect:
            return None
        return leader.LeaderElector(
            client=kubeclient.KubeClient(kubeclient.load_endpoint(s.common.kubeconfig)),
            namespace=s.lease_namespace,
            name=s.lease_name,
            identity=s.scheduler_id,
            lease_duration=s.lease_duration,
            renew_deadline=s.renew_deadline,
            retry_period=s.retry_period,
        )

    async def start(self, running: service.Running) -> None:
        self._running = running
        parts = self._opened()
        loops = {
            "watch": parts.ingest.run(),
            "scheduling": parts.scheduling.run(),
            "housekeeping": parts.scheduling.housekeeping(),
            "serving": parts.leadership.serving_follows_sync(running.grpc),
            "binder-probe": self.binder_probe_loop(),
            "campaign": parts.leadership.campaign(self.settings.scheduler_id),
        }
        self.tasks = [asyncio.create_task(coro, name=name) for name, coro in loops.items()]

    def _stop(self) -> None:
        """Stop the whole service (what losing the Lease asks): the loops end and the
        skeleton drains and closes it."""
        self.stopping.set()
        if self._running is not None:
            self._running.stop()

    def describe(self, running: service.Running) -> str:
        return (
            f"splitsched-scheduler listening grpc={running.grpc_address} "
            f"http={running.http_address} watcher={self.settings.watcher} "
            f"binders={self.settings.binders}"
        )

    async def drain(self) -> None:
        """End the loops and, on a graceful stop, release the Lease."""
        log.info("shutting down")
        self.stopping.set()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.leadership.close()

    async def close(self) -> int:
        """Close the binders' channel; exit code 1 after losing the Lease, else 0."""
        if self._parts is None:
            return 0
        await self._parts.dispatch.close()
        return self._parts.leadership.exit_code


@dataclass(frozen=True)
class _Parts:
    """The jobs around a service's state, each in its own module (built by ``open``)."""

    leadership: Leadership
    dispatch: BinderDispatch
    ingest: WatchIngest
    scheduling: SchedulingLoop


def _trace_outcomes(traces: SchedulingTraces) -> Listener:
    """A state listener that closes a decision's trace with its outcome."""

    def listener(event: DecisionEvent) -> None:
        if event.decision_id:
            traces.outcome(
                event.pod.uid, event.decision_id, kind=event.kind, message=event.message,
                binder_id=event.binder_id,
            )  # fmt: skip

    return listener


async def serve(settings: SchedulerSettings) -> int:
    """Run the scheduler until SIGTERM/SIGINT or a lost Lease; returns the exit code.
    Built inside the running loop, after tracing is set up (`SchedulingTraces` needs it).
    Here, not in `SchedulerService`, the process's tracing also feeds the store of recent
    attempts (in-process tests build services without touching the process's tracing)."""
    pods = settings.trace_store_pods
    if pods is None:  # free with tracing on (the spans are built anyway), not with it off
        pods = TRACE_STORE_PODS if tracing.enabled() else 0
    store = None
    if pods > 0:
        store = AttemptStore(pods=pods)
        tracing.record_locally(store)
    svc = SchedulerService(settings, attempt_store=store)
    return await service.serve(svc, settings.common)


def _volume_bind_timeout(settings: SchedulerSettings, config: profiles.SchedulerConfig) -> float:
    """--volume-bind-timeout, else the profiles' VolumeBinding bindTimeoutSeconds (kube's
    600 s when none sets it). kube-scheduler accepts 0 and times every volume binding out
    at once; a decision here needs time for the binder's step, so 0 is refused."""
    if settings.volume_bind_timeout is not None:
        return settings.volume_bind_timeout
    if config.volume_bind_timeout_seconds <= 0:
        raise profiles.ProfileError(
            "VolumeBinding bindTimeoutSeconds must be positive here: a decision with volume "
            "bindings needs time for the binder's volume step (or set --volume-bind-timeout)"
        )
    return float(config.volume_bind_timeout_seconds)


def _log_decision_event(event: DecisionEvent) -> None:
    """At DEBUG, each decision's life (made, bound, failed, released) with its id: how
    a pod's attempts are followed across the scheduler's and the binders' logs."""
    log.debug(
        "decision %s %s: %s on %r by %r%s", event.decision_id, event.kind.name,
        event.pod.key, event.node, event.binder_id, f": {event.message}" if event.message else "",
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    return service.main(
        "scheduler",
        load=lambda: SchedulerSettings.load(argv),
        serve=serve,
        errors=(profiles.ProfileError, OSError, leader.LeaderElectionError),
    )


if __name__ == "__main__":
    sys.exit(main())
