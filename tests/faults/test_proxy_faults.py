"""The fault-injecting proxy between the services and the real API server: each fault
class in the binders' traffic and in the watcher's, a few hundred pods each; every pod
ends bound, no node over allocatable, no pod with two Bindings accepted.

Binders (every binder request goes through the proxy):

* 5xx and 429 + Retry-After: retried with backoff (Retry-After honoured) to the deadline;
* connection resets: retried like any network error;
* latency: slower, nothing else;
* a Binding accepted whose 201 is lost (the connection reset after the API server
  answered): the retry gets 409, the binder reads the pod, finds it on the target node and
  reports BOUND.

Watcher (lists and watches go through the proxy):

* every open watch cut every second or so: re-watch from the last resourceVersion;
* connection resets on its requests: relist or re-watch with backoff;
* 5xx on lists, with 410 Gone on watches forcing relists: the list is retried with
  backoff and the relist is diffed against the view.

The default run has one test per binder fault class that matters most (5xx, lost 201s)
plus a mix of all five, the watch cuts alone plus a mix of the watcher's three; each class
alone is a long variant (``SPLITSCHED_LONG_FAULTS=1``). Last, the worst combination for
double-booking: binders that cannot learn whether their Binding worked while the watch
lags.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from splitsched.testing.faultproxy import Fault, FaultProxy
from tests.support.faults import LONG, LONG_REASON, FaultsEnv

pytestmark = pytest.mark.faults

PODS = 300
#: Requests that are watches (the query has watch=1 or watch=true).
WATCH = r"[?&]watch=(1|true)"
#: List requests of the watcher's resources (not watches).
LIST = r"^/api[s]?/[^?]*\?(?!.*watch=)"


@dataclass(frozen=True)
class BinderFault:
    name: str
    describe: str
    install: Callable[[FaultProxy], None]
    long: bool = False


def _5xx(p: FaultProxy) -> None:
    p.add(Fault.ERROR, status=503, probability=0.3)
    p.add(Fault.ERROR, status=500, probability=0.1)


def _429(p: FaultProxy) -> None:
    p.add(Fault.THROTTLE, seconds=1, probability=0.3)


def _reset(p: FaultProxy) -> None:
    p.add(Fault.RESET, probability=0.3)


def _latency(p: FaultProxy) -> None:
    p.add(Fault.LATENCY, seconds=0.4, probability=0.5)


def _lost_201(p: FaultProxy) -> None:
    p.add(Fault.LOSE_RESPONSE, method="POST", path="/binding$", when_status=201, probability=0.5)


def _mixed(p: FaultProxy) -> None:
    _lost_201(p)
    p.add(Fault.LATENCY, seconds=0.2, probability=0.3)
    p.add(Fault.ERROR, status=503, probability=0.15)
    p.add(Fault.THROTTLE, seconds=0.5, probability=0.1)
    p.add(Fault.RESET, probability=0.1)


BINDER_FAULTS = [
    BinderFault("5xx", "binders: 503 on 30%, 500 on 10% of requests", _5xx),
    BinderFault("429", "binders: 429 + Retry-After 1s on 30% of requests", _429, long=True),
    BinderFault("reset", "binders: connection reset on 30% of requests", _reset, long=True),
    BinderFault("latency", "binders: +0.4s latency on 50% of requests", _latency, long=True),
    BinderFault("lost-201", "binders: 50% of Binding 201s lost (conn reset)", _lost_201),
    BinderFault(
        "mixed",
        "binders: lost 201s 50%, 503 15%, 429 10%, resets 10%, +0.2s 30%",
        _mixed,
    ),
]


@pytest.mark.parametrize("fault", BINDER_FAULTS, ids=[f.name for f in BINDER_FAULTS])
def test_binder_traffic_faults(
    faults_env: FaultsEnv, fault: BinderFault, request: pytest.FixtureRequest
) -> None:
    if fault.long and not LONG:
        pytest.skip(f"{fault.name}: {LONG_REASON}")
    proxy, binder_config = faults_env.proxy("binder", seed=11)
    faults_env.stack(binder_kubeconfig=binder_config, binders=2)
    fault.install(proxy)
    started = time.monotonic()
    faults_env.create_workload(PODS)
    faults_env.wait_all_bound(PODS, timeout=240)
    proxy.clear_rules()
    injected = dict(proxy.faults_applied())
    assert injected, "the proxy injected nothing: the test proved nothing"
    faults_env.check_invariants(
        test=request.node.name,
        fault=fault.describe,
        count=PODS,
        started=started,
        binding_proxies=[proxy],
        injected=injected,
    )


@contextmanager
def cutting_watches(proxy: FaultProxy, *, every: float) -> Iterator[list[int]]:
    """Cut every open watch each ``every`` seconds in a background thread; yields the
    running list of how many were cut each time."""
    stop = threading.Event()
    cuts: list[int] = []

    def loop() -> None:
        while not stop.wait(every):
            cuts.append(proxy.cut_watches())

    thread = threading.Thread(target=loop, name="cut-watches", daemon=True)
    thread.start()
    try:
        yield cuts
    finally:
        stop.set()
        thread.join()


@dataclass(frozen=True)
class WatcherFault:
    name: str
    describe: str
    install: Callable[[FaultProxy], None]
    cut_every: float = 0.0
    long: bool = False


def _watch_resets(p: FaultProxy) -> None:
    p.add(Fault.RESET, method="GET", probability=0.3)


def _list_5xx(p: FaultProxy) -> None:
    p.add(Fault.ERROR, method="GET", path=WATCH, status=410, probability=0.3)
    p.add(Fault.ERROR, method="GET", path=LIST, status=500, probability=0.5)


def _watcher_mixed(p: FaultProxy) -> None:
    _watch_resets(p)
    _list_5xx(p)


WATCHER_FAULTS = [
    WatcherFault("cut", "watcher: every watch cut every 1s", lambda p: None, cut_every=1.0),
    WatcherFault(
        "reset",
        "watcher: resets on 30% of lists/watches, cut every 0.5s",
        _watch_resets,
        cut_every=0.5,
        long=True,
    ),
    WatcherFault(
        "list-5xx",
        "watcher: 500 on 50% of lists, 410 on 30% of watches, cut every 0.5s",
        _list_5xx,
        cut_every=0.5,
        long=True,
    ),
    WatcherFault(
        "mixed",
        "watcher: resets 30%, 500 on 50% of lists, 410 on 30% of watches, cut 0.5s",
        _watcher_mixed,
        cut_every=0.5,
    ),
]


@pytest.mark.parametrize("fault", WATCHER_FAULTS, ids=[f.name for f in WATCHER_FAULTS])
def test_watcher_traffic_faults(
    faults_env: FaultsEnv, fault: WatcherFault, request: pytest.FixtureRequest
) -> None:
    if fault.long and not LONG:
        pytest.skip(f"{fault.name}: {LONG_REASON}")
    watcher_proxy, watcher_config = faults_env.proxy("watcher", seed=5)
    # The binders pass through their own proxy untouched: its log counts the Bindings.
    binder_proxy, binder_config = faults_env.proxy("binder")
    fault.install(watcher_proxy)  # from the start: the initial lists are hit too
    faults_env.stack(watcher_kubeconfig=watcher_config, binder_kubeconfig=binder_config)
    started = time.monotonic()
    with cutting_watches(watcher_proxy, every=fault.cut_every or 3600) as cuts:
        faults_env.create_workload(PODS)
        faults_env.wait_all_bound(PODS, timeout=240)
    watcher_proxy.clear_rules()
    injected = dict(watcher_proxy.faults_applied())
    if sum(cuts):
        injected["watches cut"] = sum(cuts)
    assert injected, "the proxy injected nothing: the test proved nothing"
    faults_env.check_invariants(
        test=request.node.name,
        fault=fault.describe,
        count=PODS,
        started=started,
        binding_proxies=[binder_proxy],
        injected=injected,
    )


#: Fewer pods than the binders have workers: with every read failing, each binder worker
#: holds its decision until well past the scheduler's deadline (it never reports a failure
#: it is not sure of), and more pods would only queue behind them.
LAG_PODS = 100


def test_binder_gives_up_on_a_bound_pod_while_the_watch_lags(
    faults_env: FaultsEnv, request: pytest.FixtureRequest
) -> None:
    """The worst combination: every Binding's 201 is lost and every read of the pod after it fails,
    so a binder cannot learn that its bind worked, while the watch lags by seconds. The
    room of a pod that is in fact bound must not be handed out again before the watch
    shows where it went (this overcommitted 5 nodes before the binder learned to hold a
    failure it is unsure of: ``services.binder.worker.BindingPool._settle``)."""
    binder_proxy, binder_config = faults_env.proxy("binder", seed=3)
    watcher_proxy, watcher_config = faults_env.proxy("watcher", seed=4)
    faults_env.stack(
        watcher_kubeconfig=watcher_config,
        binder_kubeconfig=binder_config,
        binder_args=["--shutdown-grace", "1", "--report-flush-timeout", "1"],
    )
    binder_proxy.add(Fault.LOSE_RESPONSE, method="POST", path="/binding$", when_status=201)
    # Every read of the pod from etcd fails; the binder's check before each Binding reads
    # the API server's cache (?resourceVersion=0, services.binder.admission) and answers.
    binder_proxy.add(Fault.ERROR, method="GET", path="/pods/[^/?]+$", status=503)
    watcher_proxy.add(Fault.LATENCY, method="GET", path=WATCH, seconds=2.0)
    started = time.monotonic()
    with cutting_watches(watcher_proxy, every=3.0) as cuts:
        faults_env.create_workload(LAG_PODS)
        faults_env.wait_all_bound(LAG_PODS, timeout=240)
        time.sleep(10)  # past the bind deadline: re-decisions of "failed" pods would land
    binder_proxy.clear_rules()
    watcher_proxy.clear_rules()
    injected = dict(binder_proxy.faults_applied())
    injected["watch latency"] = watcher_proxy.faults_applied().get("latency", 0)
    injected["watches cut"] = sum(cuts)
    faults_env.check_invariants(
        test=request.node.name,
        fault="binders: 201s lost, etcd pod GETs 503; watch cut every 3s, +2s",
        count=LAG_PODS,
        started=started,
        binding_proxies=[binder_proxy],
        injected=injected,
    )
