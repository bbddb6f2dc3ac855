"""``ControlPlane``: etcd, kube-apiserver and kwok in one state dir, started in order and
stopped by PID file. The parts it puts together: ``binaries`` (what to run),
``pki`` (certificates and the admin kubeconfig), ``components`` (command lines and
health checks), ``processes`` (PID files and logs) and ``state`` (``state.json``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import ssl
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from splitsched.testing import kubeconfigs
from splitsched.testing.controlplane import binaries, components, pki
from splitsched.testing.controlplane.processes import ProcessFiles, free_port
from splitsched.testing.controlplane.state import (
    NODE_MODE_COMPONENTS,
    STATE_FILE,
    ControlPlaneError,
    ControlPlaneState,
    load_state,
    save_state,
)


def default_state_dir() -> Path:
    """``$SPLITSCHED_CLUSTER_DIR`` or ``<repo>/.local-cluster``."""
    env = os.environ.get("SPLITSCHED_CLUSTER_DIR")
    return Path(env).resolve() if env else binaries.REPO_ROOT / ".local-cluster"


class ControlPlane:
    """etcd + kube-apiserver + kwok in ``state_dir``; ``up()``, ``down()``, ``status()``."""

    def __init__(
        self,
        state_dir: Path | str | None = None,
        *,
        die_with_parent: bool = False,
        node_address: str | None = None,
        inflight: tuple[int, int] | None = None,
    ) -> None:
        """``die_with_parent``: children get SIGKILL if this Python process dies (fixtures).
        ``node_address``: real-node mode (``splitsched.testing.realnode``): kube-apiserver
        serves on this address of the node bridge, so pods reach it, and
        kube-controller-manager runs too. ``inflight``: kube-apiserver's
        ``(--max-requests-inflight, --max-mutating-requests-inflight)`` instead of the
        generous defaults, whose sum API Priority and Fairness shares among its levels."""
        self.state_dir = Path(state_dir).resolve() if state_dir else default_state_dir()
        self.die_with_parent = die_with_parent
        self.node_address = node_address
        self.inflight = inflight
        self._processes = ProcessFiles(self.state_dir, die_with_parent=die_with_parent)

    # -- paths -------------------------------------------------------------------------

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def kubeconfig_path(self) -> Path:
        """The admin kubeconfig (client cert in ``system:masters``)."""
        return self.state_dir / "admin.kubeconfig"

    @property
    def state_path(self) -> Path:
        return self.state_dir / STATE_FILE

    def log_path(self, component: str) -> Path:
        return self._processes.log_path(component)

    def pid_path(self, component: str) -> Path:
        return self._processes.pid_path(component)

    @property
    def server_url(self) -> str:
        """``https://127.0.0.1:<port>`` of the running kube-apiserver."""
        return self._require_state().server_url

    # -- state -------------------------------------------------------------------------

    def load_state(self) -> ControlPlaneState | None:
        return load_state(self.state_path)

    def _require_state(self) -> ControlPlaneState:
        state = self.load_state()
        if state is None:
            raise ControlPlaneError(f"no control plane state in {self.state_dir}; run up() first")
        return state

    def _record_pid(self, state: ControlPlaneState, component: str, pid: int) -> None:
        state.pids[component] = pid
        save_state(self.state_path, state)

    # -- status ------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Which components run (PIDs), the server URL, and whether /readyz answers ok."""
        state = self.load_state()
        names = state.components if state else self._components()
        running = {c: self._processes.running_pid(c) for c in names}
        ready = False
        if state is not None and running["kube-apiserver"] is not None:
            ready = self._apiserver_ready(state, timeout=3.0)
        return {
            "state_dir": str(self.state_dir),
            "server_url": state.server_url if state else None,
            "kubeconfig": str(self.kubeconfig_path) if state else None,
            "components": running,
            "ready": ready,
            "healthy": ready and all(pid is not None for pid in running.values()),
        }

    def is_healthy(self) -> bool:
        return bool(self.status()["healthy"])

    # -- up ----------------------------------------------------------------------------

    def up(self, *, timeout: float = 120.0) -> ControlPlaneState:
        """Start everything (idempotent: returns the running state when already healthy)."""
        existing = self.load_state()
        if existing is not None and self.is_healthy():
            return existing
        self.down()  # leftovers of a half-started or crashed control plane
        binaries.ensure_binaries(self._components())
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "logs").mkdir(exist_ok=True)
        self._processes.clear_logs()
        extra_ips = (self.node_address,) if self.node_address else ()
        pki.make_pki(self.pki_dir, extra_ips=extra_ips)
        state = ControlPlaneState(
            etcd_client_port=free_port(),
            etcd_peer_port=free_port(),
            apiserver_port=free_port(),
            kwok_port=free_port(),
            versions=binaries.binary_versions(),
            address=self.node_address or "127.0.0.1",
            controller_manager_port=free_port(),
            scheduler_port=free_port() if self.node_address else 0,
        )
        if self.inflight is not None:
            state.max_requests_inflight, state.max_mutating_requests_inflight = self.inflight
        save_state(self.state_path, state)
        kubeconfigs.write(
            self.kubeconfig_path, pki.admin_kubeconfig(self.pki_dir, state.server_url)
        )
        try:
            self._start_etcd(state, deadline=time.monotonic() + timeout)
            self._start_apiserver(state, deadline=time.monotonic() + timeout)
            self._start_controller_manager(state, deadline=time.monotonic() + timeout)
            if state.real_node:
                self._start_kube_scheduler(state, deadline=time.monotonic() + timeout)
            self._start_kwok(state, deadline=time.monotonic() + timeout)
        except BaseException:
            self.down()
            raise
        return state

    def _start_etcd(self, state: ControlPlaneState, *, deadline: float) -> None:
        data_dir = self.state_dir / "etcd-data"
        shutil.rmtree(data_dir, ignore_errors=True)
        argv = components.etcd_argv(binaries.binary_path("etcd"), state, data_dir=data_dir)
        self._start("etcd", argv, state, lambda: components.etcd_healthy(state), deadline)

    def _start_apiserver(self, state: ControlPlaneState, *, deadline: float) -> None:
        binary = binaries.binary_path("kube-apiserver")
        argv = components.apiserver_argv(binary, state, pki=self.pki_dir)
        ready = functools.partial(self._apiserver_ready, state, timeout=2.0)
        self._start("kube-apiserver", argv, state, ready, deadline)

    def _components(self) -> tuple[str, ...]:
        return ControlPlaneState(0, 0, 0, 0, address=self.node_address or "127.0.0.1").components

    def _start_controller_manager(self, state: ControlPlaneState, *, deadline: float) -> None:
        argv = components.controller_manager_argv(
            binaries.binary_path("kube-controller-manager"),
            state,
            pki=self.pki_dir,
            kubeconfig=self.kubeconfig_path,
        )
        port = state.controller_manager_port
        ready = functools.partial(components.self_signed_healthy, port)
        self._start("kube-controller-manager", argv, state, ready, deadline)

    def _start_kube_scheduler(self, state: ControlPlaneState, *, deadline: float) -> None:
        argv = components.kube_scheduler_argv(
            binaries.binary_path("kube-scheduler"),
            state,
            pki=self.pki_dir,
            kubeconfig=self.kubeconfig_path,
        )
        ready = functools.partial(components.self_signed_healthy, state.scheduler_port)
        self._start("kube-scheduler", argv, state, ready, deadline)

    def _start_kwok(self, state: ControlPlaneState, *, deadline: float) -> None:
        config = self.state_dir / "kwok.yaml"
        stages = binaries.kwok_stages_dir()
        texts = [p.read_text() for p in sorted(stages.glob("*.yaml"))]
        config.write_text(components.kwok_config(texts, stages_dir=stages))
        argv = components.kwok_argv(
            binaries.binary_path("kwok"), state, kubeconfig=self.kubeconfig_path, config=config
        )
        self._start("kwok", argv, state, lambda: components.kwok_healthy(state), deadline)

    def _start(
        self,
        component: str,
        argv: list[str],
        state: ControlPlaneState,
        ready: Callable[[], bool],
        deadline: float,
    ) -> None:
        pid = self._processes.spawn(component, argv)
        self._record_pid(state, component, pid)
        self._processes.wait_ready(component, pid, ready, deadline=deadline)

    def restart_apiserver(self, *, graceful: bool = True, timeout: float = 120.0) -> None:
        """Stop kube-apiserver (SIGTERM, or SIGKILL when not ``graceful``) and start it again
        on the same port with the same etcd and certificates; returns once ``/readyz`` is
        ok. For the fault tests: open connections and watches break, resourceVersions stay
        valid, no object is lost."""
        state = self._require_state()
        pid = self._processes.running_pid("kube-apiserver")
        if pid is not None and not graceful:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._processes.stop("kube-apiserver", timeout=timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._start_apiserver(state, deadline=deadline)
                return
            except ControlPlaneError as exc:
                # While the port was free another socket on this machine may have taken it
                # (seen once on a busy machine); such sockets are usually short-lived.
                if "address already in use" not in str(exc) or time.monotonic() > deadline:
                    raise
                print(
                    f"controlplane: port {state.apiserver_port} is taken; retrying "
                    "kube-apiserver in 1s",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(1.0)

    # -- TLS ---------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        """Trusts the local CA and presents the admin client certificate."""
        return pki.admin_ssl_context(self.pki_dir)

    def _apiserver_ready(self, state: ControlPlaneState, *, timeout: float) -> bool:
        try:
            ctx = self.ssl_context()
        except (OSError, ssl.SSLError):
            return False
        return components.apiserver_ready(state, ctx, timeout=timeout)

    # -- down --------------------------------------------------------------------------

    def stop_components(self, *names: str, timeout: float = 20.0) -> list[str]:
        """Stop some components only (the real node's teardown stops what would recreate
        or place pods before it deletes them); returns those that were running."""
        return [name for name in names if self._processes.stop(name, timeout=timeout)]

    def down(self, *, timeout: float = 20.0) -> list[str]:
        """Stop the processes ``up`` started (by PID file), kwok first; returns their names."""
        stopped: list[str] = []
        for component in reversed(NODE_MODE_COMPONENTS):
            if self._processes.stop(component, timeout=timeout):
                stopped.append(component)
        self.state_path.unlink(missing_ok=True)
        return stopped
