"""kill -9 of each service in the middle of a 1,000-pod run, then a restart: nothing lost,
nothing double-booked.

What each kill exercises:

* watcher: the scheduler's event stream breaks; it reconnects with backoff to the new
  watcher, whose sequence numbers start past the old ones, so it gets a fresh snapshot and
  rebuilds its view (keeping its decisions in flight assumed);
* scheduler: binders keep binding what they hold and buffer their reports; the new
  scheduler rebuilds its view from the watcher's snapshot, and its decision ids must never
  be mistaken for the old process's;
* one binder: its accepted decisions die with it; the scheduler's round robin skips the
  dead address, and each lost decision is resolved by the watch (bound: confirmed) or by
  the bind deadline (still unbound: forgotten and requeued).
"""

from __future__ import annotations

import time

import pytest

from splitsched.testing.faultproxy import Fault
from tests.support.faults import FaultsEnv

pytestmark = pytest.mark.faults

PODS = 1000
#: Kill when this share of the pods is bound (mid-run).
KILL_AT = 0.3
#: How long the service stays dead before it is started again.
DEAD_SECONDS = 2.0
#: Added to every Binding POST.
BINDING_LATENCY = 0.3


@pytest.mark.parametrize("victim", ["watcher", "scheduler", "binder-0"])
def test_kill9_mid_run_then_restart(
    faults_env: FaultsEnv, victim: str, request: pytest.FixtureRequest
) -> None:
    # Binders talk through a proxy: its log proves no pod got two Bindings, and its delay
    # keeps Bindings in flight and decisions queued in the binders when the kill comes
    # (a delayed request still reaches the API server after its binder died).
    proxy, binder_config = faults_env.proxy("binder")
    proxy.add(Fault.LATENCY, method="POST", path="/binding$", seconds=BINDING_LATENCY)
    running = faults_env.stack(binder_kubeconfig=binder_config, binders=2)
    started = time.monotonic()
    with faults_env.creating_workload(PODS):
        faults_env.wait_bound_at_least(int(PODS * KILL_AT), timeout=180)
        svc = running.service(victim)
        running.kill(svc)
        killed_at = faults_env.bound_count()
        time.sleep(DEAD_SECONDS)
        running.restart(svc)
    faults_env.wait_all_bound(PODS, timeout=240)
    faults_env.check_invariants(
        test=request.node.name,
        fault=f"kill -9 {victim} at {killed_at} of {PODS} bound, restarted {DEAD_SECONDS:g}s "
        f"later (Bindings +{BINDING_LATENCY:g}s)",
        count=PODS,
        started=started,
        binding_proxies=[proxy],
        injected={"kill9": 1},
    )
