"""``RealCluster``: the local control plane in real-node mode, a real node beside kwok's
nodes, and the host put back as it was afterwards.

``up`` records the host (``host.HostSnapshot``), makes the bridge and the forward guard,
starts the control plane on the bridge's address, then containerd, the kubelet, kube-proxy
and CoreDNS, and waits for the node to be Ready. ``down`` deletes every pod on the node first
(so the kubelet runs CNI teardown), stops the processes by PID, runs ``kube-proxy
--cleanup``, and undoes the rest (``teardown``). ``leftovers`` compares the host with the
record."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

from kubernetes import client

from splitsched.testing import kube
from splitsched.testing.controlplane import ControlPlane, ControlPlaneError, binaries
from splitsched.testing.realnode import host, network, teardown
from splitsched.testing.realnode.layout import NodeLayout
from splitsched.testing.realnode.node import RealNode

NODE_BINARIES = ("kubelet", "kube-proxy", "coredns", "kubectl")
#: The control plane's parts that create pods or place them.
RECREATORS = ("kube-controller-manager", "kube-scheduler")


class RealCluster:
    """Control plane + real node under ``layout.state_dir``."""

    def __init__(self, layout: NodeLayout | None = None, *, die_with_parent: bool = False):
        self.layout = layout or NodeLayout()
        self.control_plane = ControlPlane(
            self.layout.cluster_dir,
            die_with_parent=die_with_parent,
            node_address=self.layout.bridge_ip,
        )
        self.phases: dict[str, float] = {}

    @property
    def snapshot_path(self) -> Path:
        return self.layout.state_dir / "host-before.json"

    @property
    def kubeconfig_path(self) -> Path:
        return self.control_plane.kubeconfig_path

    def node(self) -> RealNode:
        return RealNode(self.layout, server_url=self.control_plane.server_url)

    # -- up ----------------------------------------------------------------------------

    def up(self) -> None:
        """Start everything (after cleaning up a previous run's leftovers)."""
        self.down()
        binaries.ensure_binaries(NODE_BINARIES)
        self.layout.state_dir.mkdir(parents=True, exist_ok=True)
        host.save(host.HostSnapshot.take(self.layout.state_dir), self.snapshot_path)
        try:
            self._phase("network", self._network_up)
            self._phase("control plane", lambda: self.control_plane.up())
            node = self.node()
            self._phase("containerd", node.start_containerd)
            self._phase("kubelet", node.start_kubelet)
            self._phase("kube-proxy", node.start_kube_proxy)
            self._phase("coredns", node.start_coredns)
            self._phase("node ready", self.wait_node_ready)
        except BaseException:
            self.down()
            raise

    def _network_up(self) -> None:
        network.bridge_up(self.layout)
        network.guard_up(self.layout)

    def _phase(self, name: str, step: object) -> None:
        start = time.monotonic()
        step()  # type: ignore[operator]
        self.phases[name] = round(time.monotonic() - start, 1)

    def wait_node_ready(self, *, timeout: float = 120.0) -> None:
        api = kube.api_client_from_kubeconfig(self.kubeconfig_path)
        name = self.layout.node_name
        try:
            kube.wait_nodes_ready(api, names=[name], timeout=timeout)
        except kube.WaitTimeout as exc:
            raise ControlPlaneError(f"node {name} not Ready in {timeout:.0f}s") from exc

    # -- down --------------------------------------------------------------------------

    def down(self) -> list[str]:
        """Stop and undo everything; returns what was running. Safe to call twice."""
        before = host.load(self.snapshot_path)
        node = RealNode(self.layout, server_url="https://unused")
        stopped: list[str] = []
        if self.control_plane.load_state() is not None and node.running()["kubelet"]:
            # Nothing may recreate or place pods while the node's are deleted.
            stopped += self.control_plane.stop_components(*RECREATORS)
            self._delete_node_pods()
        stopped += node.stop()
        teardown.kill_leftover_containers(self.layout.containerd_socket)
        node.kube_proxy_cleanup()
        stopped += self.control_plane.down()
        network.guard_down(self.layout)
        teardown.unmount_under(str(self.layout.state_dir))
        network.bridge_down(self.layout)
        if before is not None:
            teardown.remove_iptables(before)
            teardown.remove_netns_files(before)
            teardown.remove_new_veths(before)
            teardown.remove_cgroups(before)
            teardown.remove_created_paths(before)
            host.write_sysctls(before.sysctls)
        return stopped

    def _delete_node_pods(self, *, timeout: float = 90.0) -> None:
        """Delete the pods on the real node and wait until the kubelet has torn down
        their sandboxes (CNI DEL releases their addresses and veths); best effort within
        ``timeout``: the rest of ``down`` runs either way."""
        core = client.CoreV1Api(kube.api_client_from_kubeconfig(self.kubeconfig_path))
        selector = f"spec.nodeName={self.layout.node_name}"
        for pod in core.list_pod_for_all_namespaces(field_selector=selector).items:
            core.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace, grace_period_seconds=5
            )
        deadline = time.monotonic() + timeout
        with contextlib.suppress(kube.WaitTimeout):
            kube.wait_for(
                lambda: not core.list_pod_for_all_namespaces(field_selector=selector).items,
                timeout=timeout,
                interval=1.0,
                message="the node's pods to be deleted",
            )
            kube.wait_for(
                lambda: not self._sandboxes(),
                timeout=max(0.0, deadline - time.monotonic()),
                interval=1.0,
                message="their sandboxes to be torn down",
            )

    def _sandboxes(self) -> list[str]:
        out = subprocess.run(
            [
                "ctr",
                f"--address={self.layout.containerd_socket}",
                "-n",
                "k8s.io",
                "tasks",
                "ls",
                "-q",
            ],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        return out.split()

    def leftovers(self) -> list[str]:
        """What the host has that the record of ``up`` does not (empty: as it was)."""
        before = host.load(self.snapshot_path)
        if before is None:
            return [f"no host record at {self.snapshot_path}"]
        return host.differences(before, host.HostSnapshot.take(self.layout.state_dir))

    def record(self) -> dict[str, object]:
        return {"phases": self.phases, "state_dir": str(self.layout.state_dir)}

    def write_record(self) -> None:
        (self.layout.state_dir / "phases.json").write_text(json.dumps(self.record(), indent=2))
