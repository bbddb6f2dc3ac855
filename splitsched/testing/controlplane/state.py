"""What ``ControlPlane.up`` records in ``state.json`` (ports, PIDs, versions), and the names
every part of the control plane shares: its components and its error."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: The processes, in start order (``down`` stops them in reverse).
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok")
#: In real-node mode kube-scheduler (the cluster's default scheduler, which places
#: splitsched's own pods) runs too, as in a real cluster.
NODE_MODE_COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)
STATE_FILE = "state.json"


class ControlPlaneError(RuntimeError):
    """The control plane could not be started, or a binary is missing."""


@dataclass
class ControlPlaneState:
    """What ``up`` started: ports, PIDs and the API server URL (``state.json``)."""

    etcd_client_port: int
    etcd_peer_port: int
    apiserver_port: int
    kwok_port: int
    pids: dict[str, int] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    #: Where kube-apiserver serves: loopback, or in real-node mode the node bridge's address
    #: (pods reach it through the ``kubernetes`` Service, whose endpoint this is).
    address: str = "127.0.0.1"
    #: The ports kube-controller-manager and kube-scheduler serve their health on
    #: (real-node mode only).
    controller_manager_port: int = 0
    scheduler_port: int = 0
    #: kube-apiserver's in-flight limits; with API Priority and Fairness their sum is the
    #: server's concurrency, shared among the priority levels. A test that squeezes a
    #: level starts a control plane with small ones (``ControlPlane(inflight=...)``).
    max_requests_inflight: int = 2000
    max_mutating_requests_inflight: int = 1000

    @property
    def real_node(self) -> bool:
        """Serving on a node bridge (``splitsched.testing.realnode``), not loopback."""
        return self.address != "127.0.0.1"

    @property
    def components(self) -> tuple[str, ...]:
        return NODE_MODE_COMPONENTS if self.real_node else COMPONENTS

    @property
    def server_url(self) -> str:
        return f"https://{self.address}:{self.apiserver_port}"


def load_state(path: Path) -> ControlPlaneState | None:
    """The recorded state, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return ControlPlaneState(**data)


def save_state(path: Path, state: ControlPlaneState) -> None:
    """Write atomically: a reader never sees half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    tmp.replace(path)
