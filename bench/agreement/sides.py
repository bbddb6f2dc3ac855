"""The two schedulers as a run sees them: how to learn a pod's feasible set from each, and
how to wait until each has seen the state the run made.

* ``KubeSide``: kube-scheduler v1.36 (the cached binary) with the recording extender
  (``extender.py``) and ``percentageOfNodesToScore: 100``. Its feasible set is known after
  the pod was tried. It is in step at a run's start once a probe pod that fits nowhere is
  told "0/N nodes are available" with N the run's node count (its informers have dropped
  the last run's nodes); after that it only sees its own binds and our deletions of pods
  that never bound, which change nothing it counts.
* ``SplitschedSide``: the three services (``splitsched.testing.stack``). Its feasible set
  is asked of the Simulate API just before the pod is created; before that, the run waits
  until ListNodes shows exactly the run's nodes and pods, so Simulate and the scheduling
  cycle see the state the API shows.
"""

from __future__ import annotations

import abc
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc
from kubernetes import client

from bench.agreement import extender, kubeops, workload
from bench.sidebyside import contenders
from splitsched.testing import kube
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

Manifest = dict[str, Any]

SYNC_TIMEOUT = 30.0
_FITS = re.compile(r"fits on (\d+)/(\d+) nodes")
_NODES = re.compile(r"^0/(\d+) nodes are available")


class Side(abc.ABC):
    name: str
    scheduler_name: str

    @abc.abstractmethod
    def wait_synced(self, nodes: set[str], placed: Mapping[tuple[str, str], str]) -> None:
        """Return once the scheduler's view has exactly ``nodes`` and the pods ``placed``
        ((namespace, name) -> node), or raise TimeoutError."""

    def feasible_before(self, pod: Manifest) -> frozenset[str] | None:
        """The pod's feasible set, asked before it exists (None: learnt afterwards)."""
        return None

    def feasible_after(self, namespace: str, name: str) -> frozenset[str] | None:
        """The feasible set of the pod just tried (None: not known)."""
        return None


class KubeScheduler(contenders.KubeScheduler):
    """The side-by-side benchmark's kube-scheduler, with the extender and scoring all nodes."""

    def __init__(self, *, kubeconfig: Path, workdir: Path, recorder: extender.Extender) -> None:
        super().__init__(
            "kube-scheduler",
            kubeconfig=kubeconfig,
            workdir=workdir,
            qps=None,
            burst=None,
            percentage_of_nodes_to_score=100,
        )
        self.scheduler_name = "agreement-kube"
        self.recorder = recorder

    def config(self) -> dict[str, Any]:
        conf = super().config()
        conf["extenders"] = [self.recorder.config()]
        return conf


class KubeSide(Side):
    name = "kube-scheduler"

    def __init__(self, api: client.ApiClient, scheduler: KubeScheduler) -> None:
        self.api = api
        self.scheduler = scheduler
        self.scheduler_name = scheduler.scheduler_name
        self._probes = 0
        self._synced: set[str] = set()

    def wait_synced(self, nodes: set[str], placed: Mapping[tuple[str, str], str]) -> None:
        if nodes == self._synced:
            return  # only its own binds since the probe: kube-scheduler assumed them
        self._probe_until(len(nodes))
        self._synced = set(nodes)

    def _probe_until(self, count: int) -> None:
        deadline = time.monotonic() + SYNC_TIMEOUT
        ns = kube.create_namespace(self.api, prefix="agreement-probe")
        try:
            while True:
                self._probes += 1
                seen = self._probe(ns, f"probe-{self._probes}")
                if seen == count:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"kube-scheduler sees {seen} nodes, not {count}")
                time.sleep(0.2)
        finally:
            kube.delete_namespace(self.api, ns, wait=False)

    def _probe(self, namespace: str, name: str) -> int | None:
        pod = kube.make_pod(
            name, scheduler_name=self.scheduler_name, node_selector={workload.PROBE_LABEL: "no"}
        )
        pod["metadata"]["namespace"] = namespace
        uid = kubeops.create_pod(self.api, pod)
        seen = kubeops.wait_outcome(self.api, namespace, name, uid, timeout=SYNC_TIMEOUT)
        kubeops.delete_pod(self.api, namespace, name)
        match = _NODES.match(seen.message or "")
        return int(match.group(1)) if match else None

    def feasible_after(self, namespace: str, name: str) -> frozenset[str] | None:
        return self.scheduler.recorder.sets.take(namespace, name)


class SplitschedSide(Side):
    name = "splitsched"

    def __init__(self, channel: grpc.Channel, scheduler_name: str) -> None:
        self.stub = scheduler_pb2_grpc.SchedulerStub(channel)
        self.scheduler_name = scheduler_name

    def view(self) -> tuple[set[str], dict[tuple[str, str], str]]:
        """The nodes and the pods on them, as the scheduler holds them now."""
        answer = self.stub.ListNodes(
            scheduler_pb2.ListNodesRequest(include_pods=True, page_size=5000), timeout=10
        )
        nodes = {n.name for n in answer.nodes}
        pods = {(p.namespace, p.name): n.name for n in answer.nodes for p in n.pods}
        return nodes, pods

    def wait_synced(self, nodes: set[str], placed: Mapping[tuple[str, str], str]) -> None:
        deadline = time.monotonic() + SYNC_TIMEOUT
        while True:
            seen_nodes, seen_pods = self.view()
            if seen_nodes == nodes and seen_pods == dict(placed):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"splitsched's view: nodes {sorted(seen_nodes ^ nodes)} and pods "
                    f"{sorted(set(seen_pods.items()) ^ set(placed.items()))} differ from the API"
                )
            time.sleep(kubeops.POLL)

    def feasible_before(self, pod: Manifest) -> frozenset[str] | None:
        """Every node Simulate finds feasible (its top_nodes list, at most 50)."""
        request = scheduler_pb2.SimulateRequest(manifests=[json.dumps(pod)], top_nodes=50)
        placement = self.stub.Simulate(request, timeout=10).placements[0]
        if not placement.node:
            return frozenset()
        names = frozenset(n.node for n in placement.top_nodes) or frozenset({placement.node})
        fits = _FITS.search(placement.summary)
        if fits is None or int(fits.group(1)) != len(names):
            raise RuntimeError(f"Simulate listed {len(names)} nodes: {placement.summary!r}")
        return names
