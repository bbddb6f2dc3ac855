"""A second kube-controller-manager beside a local control plane's, running only the
workload controllers (Deployments, ReplicaSets, Jobs) that the soak's churn needs.

The control plane's own kube-controller-manager runs just what a scheduler relies on
(``components.CONTROLLERS``); the workload controllers would add their sync loops to every
test run on a 2-core machine, so the soak (``bench.soak``) starts them itself, as this
process, from the same binary and admin kubeconfig, and stops it at the end. kwok's
``pod-complete`` stage (already installed) finishes the pods Jobs own.
"""

from __future__ import annotations

import functools
import time

from splitsched.testing.controlplane import ControlPlane, binaries, components, free_port
from splitsched.testing.controlplane.processes import ProcessFiles, stop_pid

NAME = "kube-controller-manager-workloads"
CONTROLLERS = ("deployment-controller", "replicaset-controller", "job-controller")


def argv(cp: ControlPlane, port: int) -> list[str]:
    """The control plane's controller-manager command line with only ``CONTROLLERS``,
    its own secure port and certificate dir."""
    state = cp.load_state()
    if state is None:
        raise RuntimeError(f"no control plane in {cp.state_dir}")
    base = components.controller_manager_argv(
        binaries.binary_path("kube-controller-manager"),
        state,
        pki=cp.pki_dir,
        kubeconfig=cp.kubeconfig_path,
    )
    replaced = {
        "--controllers": ",".join(CONTROLLERS),
        "--secure-port": str(port),
        "--cert-dir": str(cp.pki_dir / NAME),
    }
    out = []
    for arg in base:
        flag, eq, _ = arg.partition("=")
        out.append(f"{flag}={replaced[flag]}" if eq and flag in replaced else arg)
    return out


class WorkloadControllers:
    """Start with ``start()``, stop with ``stop()``; its log is ``logs/<NAME>.log`` in the
    control plane's state dir. It dies with this process."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.files = ProcessFiles(cp.state_dir, die_with_parent=True)
        self.pid: int | None = None

    def start(self, *, timeout: float = 60.0) -> None:
        port = free_port()
        self.pid = self.files.spawn(NAME, argv(self.cp, port))
        ready = functools.partial(components.self_signed_healthy, port)
        self.files.wait_ready(NAME, self.pid, ready, deadline=time.monotonic() + timeout)

    def stop(self) -> None:
        """By the PID ``start`` got (the PID file's name is not the binary's, so the
        control plane's ``running_pid`` would not own it)."""
        if self.pid is not None:
            stop_pid(self.pid, timeout=20.0)
            self.files.pid_path(NAME).unlink(missing_ok=True)
            self.pid = None
