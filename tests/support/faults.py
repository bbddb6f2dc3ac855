"""What the fault tier's tests share (``tests/faults/``): the workload's sizes and the
bin-packing profile, the results table's rows, a ``Stack`` whose services can be killed and
restarted, and ``FaultsEnv``, from which a fault test builds its run and checks the two
promises (every pod bound, nothing double-booked). The fixtures that build these and the
hooks that print the table live in ``tests/faults/conftest.py``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from splitsched.testing import faultproxy, invariants, kube, manifests, stack

NODE_COUNT = 30
NODE_CPU_MILLI = 4000
#: The share of the nodes' CPU a workload asks for.
FILL = 0.8
#: Short bind deadline: a decision whose binder died is retried after this many seconds.
BIND_TIMEOUT = "8"
#: How long creating one pod is retried through an API server outage.
CREATE_RETRY_SECONDS = 120.0
LONG = os.environ.get("SPLITSCHED_LONG_FAULTS", "") not in ("", "0")
LONG_REASON = (
    "long fault variant: set SPLITSCHED_LONG_FAULTS=1 to run it (kept out of the default "
    "run so the fault tier stays under ~6 minutes on a 2-core machine)"
)

#: A profile that packs pods onto the fullest node that fits: nodes fill to exactly their
#: allocatable, so one double-booked pod makes a node overcommitted.
BIN_PACKING_PROFILE = manifests.BIN_PACKING_PROFILE


# -- results table ---------------------------------------------------------------------------


@dataclass
class FaultResult:
    """One row of the table: what was tried and what the API server shows afterwards."""

    test: str
    fault: str
    pods: int
    lost: int
    double_booked: int
    overcommitted_nodes: int
    injected: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


RESULTS: list[FaultResult] = []


# -- the fault nodes -------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultNodes:
    label: str
    names: list[str]

    @property
    def selector(self) -> dict[str, str]:
        return {"faults": self.label}


# -- stacks whose processes can be killed ---------------------------------------------------


#: A ``Stack`` whose services can be killed with SIGKILL and started again with the same
#: command line (same ports, so peers reconnect to the same address).
FaultStack = stack.RestartableStack


@dataclass
class FaultsEnv:
    """What a fault test builds its run from; everything it starts is stopped at the end."""

    api: client.ApiClient
    namespace: str
    nodes: FaultNodes
    configs: dict[str, Path]
    profiles: Path
    workdir: Path
    stacks: list[FaultStack] = field(default_factory=list)
    proxies: list[faultproxy.FaultProxy] = field(default_factory=list)

    def proxy(self, component: str, *, seed: int = 1) -> tuple[faultproxy.FaultProxy, Path]:
        """A started proxy in front of the API server, and ``component``'s kubeconfig
        pointed at it."""
        source = self.configs[component]
        proxy = faultproxy.FaultProxy.for_kubeconfig(source, seed=seed, name=f"proxy-{component}")
        proxy.start()
        self.proxies.append(proxy)
        config = faultproxy.proxied_kubeconfig(
            source, proxy_url=proxy.url, dest=self.workdir / f"{component}-proxied.kubeconfig"
        )
        return proxy, config

    def stack(
        self,
        *,
        watcher_kubeconfig: Path | None = None,
        binder_kubeconfig: Path | None = None,
        binders: int = 2,
        scheduler_args: Sequence[str] = (),
        binder_args: Sequence[str] = (),
    ) -> FaultStack:
        """Start watcher, binders and a bin-packing scheduler with a short bind deadline."""
        s = FaultStack(
            workdir=self.workdir / f"stack-{len(self.stacks)}",
            watcher_kubeconfig=watcher_kubeconfig or self.configs["watcher"],
            binder_kubeconfig=binder_kubeconfig or self.configs["binder"],
            binders=binders,
            binder_args=binder_args,
            scheduler_args=[
                "--bind-timeout", BIND_TIMEOUT, "--profiles", str(self.profiles),
                *scheduler_args,
            ],
        )  # fmt: skip
        self.stacks.append(s)
        s.start(timeout=120)
        return s

    def close(self) -> None:
        for s in self.stacks:
            s.stop()
        for p in self.proxies:
            p.stop()

    # -- workload -------------------------------------------------------------------------

    def create_workload(
        self, count: int, *, fill: float = FILL, names: Iterable[int] | None = None
    ) -> list[str]:
        """``count`` identical pods ``p-<i>`` on the fault nodes asking for ``fill`` of their
        CPU in all (so every pod fits: the nodes hold a whole number of them with room
        left); ``names``: create only these indexes (a workload in parts). Creation rides
        out an API server outage (retried; AlreadyExists after a lost answer is success)."""
        cpu = int(len(self.nodes.names) * NODE_CPU_MILLI * fill / count)
        pods = [
            kube.make_pod(f"p-{i}", cpu=f"{cpu}m", memory="32Mi", node_selector=self.nodes.selector)
            for i in (range(count) if names is None else names)
        ]
        core = client.CoreV1Api(self.api)

        def create(pod: dict[str, Any]) -> None:
            deadline = time.monotonic() + CREATE_RETRY_SECONDS
            while True:
                try:
                    core.create_namespaced_pod(self.namespace, pod)
                    return
                except ApiException as exc:
                    if exc.status == 409:
                        return  # an earlier attempt created it; its answer was lost
                    if exc.status not in (0, 429, 500, 502, 503, 504):
                        raise
                except (urllib3.exceptions.HTTPError, OSError):
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not create {pod['metadata']['name']}")
                time.sleep(0.5)

        # As many threads as the admin client's connection pool holds (10).
        with ThreadPoolExecutor(max_workers=10) as pool:
            list(pool.map(create, pods))
        return [str(p["metadata"]["name"]) for p in pods]

    @contextlib.contextmanager
    def creating_workload(self, count: int) -> Iterator[threading.Thread]:
        """Create the workload in a background thread (so faults hit a run in progress);
        on exit wait for it and fail if creating failed."""
        errors: list[BaseException] = []

        def run() -> None:
            try:
                self.create_workload(count)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=run, name="create-pods", daemon=True)
        thread.start()
        try:
            yield thread
        finally:
            thread.join()
        assert not errors, f"creating pods failed: {errors[0]!r}"

    def pods(self) -> list[dict[str, Any]]:
        return invariants.list_json(self.api, f"/api/v1/namespaces/{self.namespace}/pods")

    def bound_count(self) -> int:
        return sum(1 for p in self.pods() if (p.get("spec") or {}).get("nodeName"))

    def wait_bound_at_least(self, count: int, *, timeout: float = 120.0) -> int:
        """Wait until ``count`` pods of the namespace are bound (mid-run kill points)."""
        return kube.wait_for(
            lambda: (n := self.bound_count()) >= count and n,
            timeout=timeout,
            interval=0.2,
            message=f"{count} pods bound",
        )

    def wait_all_bound(self, count: int, *, timeout: float = 180.0) -> None:
        """Wait for every pod to be bound; on a timeout, fail with what is still pending."""
        deadline = time.monotonic() + timeout
        while True:
            bound = self.bound_count()
            if bound >= count:
                return
            if time.monotonic() > deadline:
                pending = sorted(
                    p["metadata"]["name"]
                    for p in self.pods()
                    if not (p.get("spec") or {}).get("nodeName")
                )
                logs = "\n".join(s.tracebacks() for s in self.stacks)
                pytest.fail(
                    f"{count - bound} of {count} pods not bound after {timeout:.0f}s "
                    f"(lost): {pending[:20]}\n{logs}"
                )
            time.sleep(0.5)

    # -- the promises ---------------------------------------------------------------------

    def check_invariants(
        self,
        *,
        test: str,
        fault: str,
        count: int,
        started: float,
        binding_proxies: Sequence[faultproxy.FaultProxy] = (),
        injected: dict[str, int] | None = None,
    ) -> FaultResult:
        """Every pod bound, no fault node over its allocatable, no pod with two Bindings
        accepted (from the proxies the binders talked through); records the result row."""
        nodes, pods = invariants.cluster_state(self.api)
        ours = [n for n in nodes if n.name in set(self.nodes.names)]
        mine = [p for p in pods if p.namespace == self.namespace]
        on_fault_nodes = [p for p in pods if p.node_name in set(self.nodes.names)]
        over = invariants.overcommitted(ours, on_fault_nodes)
        unbound = [p.key for p in mine if not p.node_name]
        accepted: Counter[str] = Counter()
        for proxy in binding_proxies:
            accepted.update(proxy.accepted_bindings())
        doubles = {k: n for k, n in accepted.items() if n > 1}
        result = FaultResult(
            test=test,
            fault=fault,
            pods=count,
            lost=len(unbound) + max(0, count - len(mine)),
            double_booked=len(doubles),
            overcommitted_nodes=len({line.split(":")[0] for line in over}),
            injected=dict(injected or {}),
            seconds=time.monotonic() - started,
        )
        RESULTS.append(result)
        assert len(mine) == count, f"{count - len(mine)} pods missing from the namespace"
        assert unbound == [], f"{len(unbound)} pods never bound: {unbound[:20]}"
        assert over == [], "nodes over allocatable (double-booked):\n" + "\n".join(over)
        assert doubles == {}, f"pods with more than one Binding accepted: {doubles}"
        if binding_proxies:
            # Every bound pod's Binding went through a proxy, so the log covers them all
            # (answered 201, or unanswered by an API server killed mid-request).
            forwarded: Counter[str] = Counter()
            for proxy in binding_proxies:
                forwarded.update(proxy.forwarded_bindings())
            bypassed = {p.key for p in mine} - set(forwarded)
            assert not bypassed, f"Bindings that bypassed the proxies: {sorted(bypassed)[:10]}"
        placement = invariants.placement_violations(ours, mine)
        assert placement == [], "\n".join(placement)
        return result
