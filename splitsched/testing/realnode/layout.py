"""Where the real node lives: its state directory, bridge, addresses and ports. One frozen
value every other part of the tier reads, so the configs are pure functions of it."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

#: Machine-wide: the tier uses a bridge, iptables, cgroups and ports 10250 and 53.
DEFAULT_STATE_DIR = Path("/var/lib/splitsched-realnode")
LOCK_PATH = Path("/run/lock/splitsched-realnode.lock")


@dataclass(frozen=True)
class NodeLayout:
    """The node's names and addresses. Pod and Service addresses exist only on ``bridge``
    and in the network namespaces the tier creates."""

    state_dir: Path = DEFAULT_STATE_DIR
    node_name: str = "splitsched-node"
    bridge: str = "ssched0"
    pod_subnet: str = "10.85.0.0/24"
    service_subnet: str = "10.96.0.0/16"
    cluster_domain: str = "cluster.local"
    kubelet_port: int = 10250
    kubelet_healthz_port: int = 10248
    proxy_healthz_port: int = 10256
    proxy_metrics_port: int = 10249
    dns_health_port: int = 10254
    dns_ready_port: int = 10253

    @property
    def bridge_ip(self) -> str:
        """The bridge's address: pods' gateway, the API server, the kubelet and DNS."""
        return str(next(ipaddress.ip_network(self.pod_subnet).hosts()))

    @property
    def bridge_prefix(self) -> int:
        return ipaddress.ip_network(self.pod_subnet).prefixlen

    # -- paths --------------------------------------------------------------------------

    @property
    def cluster_dir(self) -> Path:
        """The control plane's state dir (``ControlPlane`` in real-node mode)."""
        return self.state_dir / "cluster"

    @property
    def node_dir(self) -> Path:
        """Process files (PIDs, logs) of the node's processes."""
        return self.state_dir / "node"

    @property
    def containerd_dir(self) -> Path:
        return self.state_dir / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.state_dir / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.state_dir / "cni" / "ipam"

    @property
    def kubelet_dir(self) -> Path:
        return self.state_dir / "kubelet"

    @property
    def pod_logs_dir(self) -> Path:
        return self.state_dir / "pod-logs"

    @property
    def pki_dir(self) -> Path:
        return self.cluster_dir / "pki"
