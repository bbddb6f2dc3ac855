"""The watcher as a real process against the real control plane.

`python -m services.watcher` runs with a least-privilege kubeconfig (get/list/watch of
nodes, pods, namespaces, poddisruptionbudgets and storage only). A gRPC client subscribes
and checks the snapshot and the deltas that creating, changing and deleting nodes and pods
produce; a small TCP proxy between the watcher and the API server is cut to check the
watch recovers.
"""

from __future__ import annotations

import contextlib
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kubernetes import client

from splitsched import wire
from splitsched.launch import rights
from splitsched.testing import storage
from splitsched.testing.controlplane import REPO_ROOT
from splitsched.testing.kube import (
    create_kwok_nodes,
    create_pods,
    delete_nodes,
    make_pod,
    service_account_kubeconfig,
    wait_for,
)
from splitsched.v1 import watcher_pb2, watcher_pb2_grpc

E = watcher_pb2.ClusterEvent
WATCHER_RULES = [dict(rule) for rule in rights.WATCHER_RULES]  # the chart's, exactly
LISTEN_LINE = re.compile(r"splitsched-watcher listening grpc=\S+:(\d+) http=\S+:(\d+)")


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ---- the watcher process -----------------------------------------------------------------


@dataclass
class Watcher:
    proc: subprocess.Popen[str]
    grpc_port: int
    http_port: int
    log_path: Path

    def http_status(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=5) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            return str(r.read().decode())

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def run_watcher(kubeconfig: Path, tmp_path: Path, *extra: str) -> Iterator[Watcher]:
    log_path = tmp_path / f"watcher-{uuid.uuid4().hex[:6]}.log"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.watcher", "--kubeconfig", str(kubeconfig),
             "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
             "--page-size", "3", *extra],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log_file, text=True,
        )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = LISTEN_LINE.search(line)
        assert match, f"no listening line: {line!r}\n{log_path.read_text()}"
        yield Watcher(proc, int(match.group(1)), int(match.group(2)), log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class Subscription:
    """Reads a StreamClusterEvents stream on a thread into a queue."""

    def __init__(self, port: int, **request: Any) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = watcher_pb2_grpc.WatcherStub(self.channel)
        self.call = stub.StreamClusterEvents(
            watcher_pb2.StreamClusterEventsRequest(subscriber="it", **request)
        )
        self.events: queue.Queue[watcher_pb2.ClusterEvent] = queue.Queue()
        self.seen: list[watcher_pb2.ClusterEvent] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with contextlib.suppress(grpc.RpcError):
            for batch in self.call:
                for ev in batch.events:
                    self.events.put(ev)

    def next(self, timeout: float = 20.0) -> watcher_pb2.ClusterEvent:
        ev = self.events.get(timeout=timeout)
        self.seen.append(ev)
        return ev

    def until_synced(self) -> list[watcher_pb2.ClusterEvent]:
        out = [self.next()]
        assert out[0].type == E.SNAPSHOT_BEGIN
        while out[-1].type != E.SYNCED:
            out.append(self.next())
        return out

    def wait(
        self, pred: Callable[[watcher_pb2.ClusterEvent], bool], timeout: float = 30.0
    ) -> watcher_pb2.ClusterEvent:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("expected event did not arrive")
            try:
                ev = self.next(timeout=left)
            except queue.Empty:
                raise AssertionError("expected event did not arrive") from None
            if pred(ev):
                return ev

    def close(self) -> None:
        self.call.cancel()
        self.channel.close()


def is_pod(type_: int, name: str) -> Callable[[watcher_pb2.ClusterEvent], bool]:
    return lambda e: e.type == type_ and e.WhichOneof("object") == "pod" and e.pod.name == name


def is_node(type_: int, name: str) -> Callable[[watcher_pb2.ClusterEvent], bool]:
    return lambda e: e.type == type_ and e.WhichOneof("object") == "node" and e.node.name == name


@pytest.fixture
def watcher_kubeconfig(kube_api: client.ApiClient, namespace: str) -> Path:
    return service_account_kubeconfig(
        kube_api, namespace=namespace, name="watcher", cluster_role_rules=WATCHER_RULES
    )


# ---- a TCP proxy whose connections the test can cut ----------------------------------------


class CuttableProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            with self.lock:
                self.conns += [down, up]
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> int:
        """Reset every open connection; returns how many were cut."""
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        return len(conns) // 2

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.cut()


# ---- tests -------------------------------------------------------------------------------


def test_snapshot_then_deltas_for_nodes_and_pods(
    kube_api: client.ApiClient, namespace: str, watcher_kubeconfig: Path, tmp_path: Path
) -> None:
    core = client.CoreV1Api(kube_api)
    nodes = create_kwok_nodes(kube_api, 2, name_prefix=_unique("wn"), cpu="8", memory="32Gi")
    try:
        create_pods(kube_api, namespace=namespace, pods=[
            make_pod("pending-0", cpu="250m", memory="64Mi"),
            make_pod("bound-0", scheduler_name="other-scheduler"),
            make_pod("foreign-0", scheduler_name="other-scheduler"),
        ])  # fmt: skip
        core.create_namespaced_binding(
            namespace,
            {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound-0"},
             "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[0]}},
            _preload_content=False,
        )  # fmt: skip
        with run_watcher(watcher_kubeconfig, tmp_path, "--scheduler-names", "splitsched") as w:
            channel = grpc.insecure_channel(f"127.0.0.1:{w.grpc_port}")
            health = health_pb2_grpc.HealthStub(channel)

            def serving() -> bool:
                resp = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
                return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)

            wait_for(serving, timeout=30, message=f"watcher SERVING\n{w.logs()}")
            assert w.http_status("/readyz") == 200
            assert w.http_status("/healthz") == 200
            channel.close()

            sub = Subscription(w.grpc_port)
            try:
                snap = sub.until_synced()
                snap_nodes = {e.node.name: e.node for e in snap if e.WhichOneof("object") == "node"}
                snap_pods = {e.pod.name: e.pod for e in snap if e.WhichOneof("object") == "pod"}
                assert set(nodes) <= set(snap_nodes)
                assert snap_nodes[nodes[0]].allocatable["cpu"] == 8000
                assert snap_nodes[nodes[0]].allocatable["memory"] == 32 * 2**30
                mine = {n for n, p in snap_pods.items() if p.namespace == namespace}
                # The other scheduler's pending pod is not streamed; its bound one is.
                assert mine == {"pending-0", "bound-0"}
                pending = wire.pod_from_proto(snap_pods["pending-0"])
                assert pending.requests == {"cpu": 250, "memory": 64 * 2**20}
                assert pending.scheduler_name == "splitsched" and not pending.node_name
                assert snap_pods["bound-0"].node_name == nodes[0]
                assert len({e.sequence for e in snap}) == 1

                # Pods: create, modify, delete.
                create_pods(kube_api, namespace=namespace, pods=[make_pod("new-0")])
                added = sub.wait(is_pod(E.ADDED, "new-0"))
                assert added.sequence > snap[-1].sequence
                core.patch_namespaced_pod("new-0", namespace, {"metadata": {"labels": {"x": "1"}}})
                modified = sub.wait(is_pod(E.MODIFIED, "new-0"))
                assert modified.pod.labels["x"] == "1"
                assert modified.sequence > added.sequence
                core.delete_namespaced_pod("new-0", namespace, grace_period_seconds=0)
                sub.wait(is_pod(E.DELETED, "new-0"))

                # A pod that turns Succeeded leaves the view as DELETED.
                core.patch_namespaced_pod_status(
                    "pending-0", namespace, {"status": {"phase": "Succeeded"}}
                )
                sub.wait(is_pod(E.DELETED, "pending-0"))

                # Nodes: create, modify, delete.
                extra = create_kwok_nodes(kube_api, 1, name_prefix=_unique("wx"), wait_ready=False)
                sub.wait(is_node(E.ADDED, extra[0]))
                core.patch_node(extra[0], {"spec": {"unschedulable": True}})
                ev = sub.wait(lambda e: is_node(E.MODIFIED, extra[0])(e) and e.node.unschedulable)
                assert ev.node.unschedulable
                delete_nodes(kube_api, extra)
                sub.wait(is_node(E.DELETED, extra[0]))
                seqs = [e.sequence for e in sub.seen if e.type not in (
                    E.SNAPSHOT_BEGIN, E.SNAPSHOT, E.SYNCED)]  # fmt: skip
                assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
            finally:
                sub.close()
            metrics = w.metrics()
            assert 'splitsched_watcher_events_total{resource="pods",type="ADDED"}' in metrics
            assert 'splitsched_watcher_relists_total{reason="initial",resource="nodes"}' in metrics
    finally:
        delete_nodes(kube_api, nodes)


def test_pod_with_quantity_core_rejects_is_streamed_invalid(
    kube_api: client.ApiClient, namespace: str, watcher_kubeconfig: Path, tmp_path: Path
) -> None:
    # The API server accepts any non-negative cpu quantity; 2^63-1 cores is beyond int64
    # millicores, which the core refuses (kube-scheduler's MilliValue would overflow).
    create_pods(kube_api, namespace=namespace, pods=[
        make_pod("huge", cpu="9223372036854775807", memory="64Mi")
    ])  # fmt: skip
    with run_watcher(watcher_kubeconfig, tmp_path) as w:
        sub = Subscription(w.grpc_port)
        try:
            snap = sub.until_synced()
            pods = [e.pod for e in snap if e.WhichOneof("object") == "pod" and e.pod.name == "huge"]
            assert len(pods) == 1
            assert "cpu" in pods[0].invalid_reason
            assert "out of range" in pods[0].invalid_reason
            assert pods[0].namespace == namespace and pods[0].uid
        finally:
            sub.close()


def test_watch_recovers_after_connection_cut(
    kube_api: client.ApiClient, namespace: str, watcher_kubeconfig: Path, tmp_path: Path
) -> None:
    config = yaml.safe_load(watcher_kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    host, port = server.removeprefix("https://").rsplit(":", 1)
    proxy = CuttableProxy((host, int(port)))
    try:
        config["clusters"][0]["cluster"]["server"] = f"https://{host}:{proxy.port}"
        proxied = tmp_path / "proxied.kubeconfig"
        proxied.write_text(yaml.safe_dump(config))
        with run_watcher(proxied, tmp_path) as w:
            sub = Subscription(w.grpc_port)
            try:
                sub.until_synced()
                create_pods(kube_api, namespace=namespace, pods=[make_pod("before")])
                sub.wait(is_pod(E.ADDED, "before"))
                assert proxy.cut() >= 1
                # Changes made while the watch is down arrive once it reconnects.
                create_pods(kube_api, namespace=namespace, pods=[make_pod("during")])
                sub.wait(is_pod(E.ADDED, "during"))
                proxy.cut()
                create_pods(kube_api, namespace=namespace, pods=[make_pod("after")])
                sub.wait(is_pod(E.ADDED, "after"))
                assert not [e for e in sub.seen[1:] if e.type == E.SNAPSHOT_BEGIN]
                assert "watch broke" in w.logs()
            finally:
                sub.close()
            assert w.proc.poll() is None
    finally:
        proxy.close()


def test_not_ready_until_nodes_and_pods_are_listed(
    kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    # Without the right to list pods the initial sync never completes: the process stays
    # alive (healthz ok) but not ready, on both the HTTP and the gRPC health endpoints.
    nodes_only = service_account_kubeconfig(
        kube_api, namespace=namespace, name="nodes-only", cluster_role_rules=[
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        ],
    )  # fmt: skip
    with run_watcher(nodes_only, tmp_path, "--no-pdbs") as w:
        wait_for(lambda: "pods: list failed" in w.logs(), timeout=20, message="a 403 on pods")
        assert "403" in w.logs()
        assert w.http_status("/healthz") == 200
        assert w.http_status("/readyz") == 503
        with grpc.insecure_channel(f"127.0.0.1:{w.grpc_port}") as channel:
            resp = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="splitsched.v1.Watcher"), timeout=5
            )
        assert resp.status == health_pb2.HealthCheckResponse.NOT_SERVING
        assert w.proc.poll() is None


def test_storage_is_streamed_and_updates_that_change_nothing_streamed_are_absorbed(
    kube_api: client.ApiClient, namespace: str, watcher_kubeconfig: Path, tmp_path: Path
) -> None:
    """Claims, volumes, classes and CSINodes, in the snapshot and as deltas; a claim's
    status condition changes nothing the scheduler reads (absorbed), its selected-node
    annotation does (MODIFIED)."""
    core = client.CoreV1Api(kube_api)
    cls, pv, node = _unique("wsc"), _unique("wpv"), _unique("wcsi")
    storage.create(kube_api, storage.make_storage_class(cls))
    storage.create(kube_api, storage.make_pv(pv, storage_class=cls, csi_driver="d.example.com"))
    storage.create(kube_api, storage.make_pvc("data", storage_class=cls), namespace=namespace)
    storage.create(kube_api, storage.make_csi_node(node, {"d.example.com": 3}))
    try:
        with run_watcher(watcher_kubeconfig, tmp_path) as w:
            sub = Subscription(w.grpc_port)
            try:
                snap = sub.until_synced()
                kinds = {
                    (which, getattr(e, which).name)
                    for e in snap
                    if (which := e.WhichOneof("object"))
                }
                assert {
                    ("storage_class", cls),
                    ("pv", pv),
                    ("pvc", "data"),
                    ("csi_node", node),
                } <= kinds
                (claim,) = [
                    e.pvc
                    for e in snap
                    if e.WhichOneof("object") == "pvc" and e.pvc.namespace == namespace
                ]
                assert (claim.storage_class_name, claim.request_bytes) == (cls, 2**30)
                (csi,) = [
                    e.csi_node
                    for e in snap
                    if e.WhichOneof("object") == "csi_node" and e.csi_node.name == node
                ]
                assert dict(csi.allocatable) == {"d.example.com": 3}

                core.patch_namespaced_persistent_volume_claim_status(
                    "data",
                    namespace,
                    {"status": {"conditions": [{"type": "Resizing", "status": "True"}]}},
                )
                core.patch_namespaced_persistent_volume_claim(
                    "data",
                    namespace,
                    {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n1"}}},
                )
                ev = sub.wait(lambda e: e.WhichOneof("object") == "pvc" and e.pvc.name == "data")
                assert ev.type == E.MODIFIED and ev.pvc.selected_node == "n1"
                absorbed = 'absorbed_updates_total{resource="persistentvolumeclaims"} 1.0'
                assert f"splitsched_watcher_{absorbed}" in w.metrics()
            finally:
                sub.close()
    finally:
        storage.cleanup(
            kube_api, namespace=namespace, volumes=[pv], classes=[cls], csi_nodes=[node]
        )


def test_devices_are_streamed_from_resource_k8s_io(
    kube_api: client.ApiClient, namespace: str, watcher_kubeconfig: Path, tmp_path: Path
) -> None:
    """A DeviceClass, a ResourceSlice and a ResourceClaim from the real API server (the
    watcher's own rights: it may list and watch them), in the snapshot; a claim's status
    reservation is a delta the scheduler reads."""
    resource = client.ResourceV1Api(kube_api)
    cls, slice_name, node = _unique("gpu"), _unique("slice"), _unique("n")
    resource.create_device_class(
        {
            "metadata": {"name": cls},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{cls}.example.com"'}}]
            },
        }
    )
    resource.create_resource_slice(
        {
            "metadata": {"name": slice_name},
            "spec": {
                "driver": f"{cls}.example.com",
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "gpu-0",
                        "attributes": {"model": {"string": "A100"}},
                        "capacity": {"memory": {"value": "80Gi"}},
                    }
                ],
            },
        }
    )
    resource.create_namespaced_resource_claim(
        namespace,
        {
            "metadata": {"name": "gpus"},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}
            },
        },
    )
    try:
        with run_watcher(watcher_kubeconfig, tmp_path) as w:
            sub = Subscription(w.grpc_port)
            try:
                snap = {  # keyed by namespace too: other tests' claims may share the name
                    (which, getattr(e, which).name, getattr(getattr(e, which), "namespace", "")): e
                    for e in sub.until_synced()
                    if (which := e.WhichOneof("object"))
                }
                got_slice = snap[("resource_slice", slice_name, "")].resource_slice
                assert (got_slice.driver, got_slice.node_name) == (f"{cls}.example.com", node)
                attrs = got_slice.devices[0].attributes
                assert attrs[f"{cls}.example.com/model"].string == "A100"
                assert (
                    snap[("device_class", cls, "")].device_class.selectors[0].startswith("device.")
                )
                got_claim = snap[("resource_claim", "gpus", namespace)].resource_claim
                assert (got_claim.namespace, got_claim.requests[0].exactly.device_class) == (
                    namespace, cls,
                )  # fmt: skip
                resource.patch_namespaced_resource_claim_status("gpus", namespace, {"status": {
                    "reservedFor": [{"resource": "pods", "name": "p", "uid": "u-p"}],
                    "allocation": {"devices": {"results": [{"request": "gpu",
                        "driver": f"{cls}.example.com", "pool": node, "device": "gpu-0"}]}},
                }})  # fmt: skip
                ev = sub.wait(
                    lambda e: (
                        e.WhichOneof("object") == "resource_claim"
                        and e.resource_claim.name == "gpus"
                        and e.resource_claim.namespace == namespace
                    )
                )
                assert ev.type == E.MODIFIED
                assert [r.name for r in ev.resource_claim.reserved_for] == ["p"]
                assert ev.resource_claim.allocation.results[0].device == "gpu-0"
            finally:
                sub.close()
    finally:
        resource.delete_resource_slice(slice_name)
        resource.delete_device_class(cls)
