"""Run the three splitsched services as real processes: for e2e tests, the demo and the
benchmarks.

`Stack` starts one watcher, N binders and one scheduler on free loopback ports, each with
its own least-privilege kubeconfig (`component_kubeconfigs` makes them with exactly the
RBAC rules the Helm chart grants), waits until each reports ready on /readyz, and stops
exactly what it started. Logs go to files in the stack's work dir, one per service, begun
afresh by each `start` (the demo's work dir outlives its runs).

With `schedulers=2` (or more) the schedulers run with leader election on a Lease in
`lease_namespace` (their kubeconfig has `SCHEDULER_RULES` only), the binders report to all
of them (`ipv4:a,b`; their channel picks the SERVING one), and `start` waits until one of
them leads; the standbys are never ready.

Every gRPC hop is mutual TLS by default, as the Helm chart installs it: `start` writes a
CA and `<component>.crt`/`.key` for watcher, scheduler, binder and an `ops` client (common
name `splitsched-<component>`; splitsched.launch.certs) into `workdir/tls`, or
`tls=<dir>` uses the ones there; `TRUSTED_CLIENTS` says who may call each server's
restricted RPCs. Clients (tests, the demo, the CLI) reach the services with `channel()`
and `cli_env()`, as the `ops` identity unless told otherwise. `tls=False` runs plaintext,
for debugging only.

How one process is started, waited for and stopped, and the rights each component needs,
are product code shared with `splitsched up` (`splitsched.launch`); this module adds what
only tests and the demo want: a ServiceAccount for each component, several schedulers
under leader election, channels and CLI settings as any identity.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from kubernetes import client

from splitsched.launch import certs, processes
from splitsched.launch.processes import TRUSTED_CLIENTS, Service
from splitsched.launch.rights import BINDER_RULES, SCHEDULER_RULES, WATCHER_RULES
from splitsched.testing import controlplane, kube

# Re-exported: the rights each component needs (the Helm chart grants the same), and who
# may call each server's restricted RPCs.
__all__ = [
    "BINDER_RULES",
    "SCHEDULER_RULES",
    "TRUSTED_CLIENTS",
    "WATCHER_RULES",
    "RestartableStack",
    "Service",
    "Stack",
    "component_kubeconfigs",
]


def component_kubeconfigs(
    admin_api: client.ApiClient,
    *,
    namespace: str,
    directory: Path,
    with_scheduler: bool = False,
) -> dict[str, Path]:
    """ServiceAccounts for the watcher and the binder with their exact rights (the
    scheduler needs none: it never talks to the API server), and with `with_scheduler`
    one for schedulers under leader election (`SCHEDULER_RULES`: their Lease only)."""
    configs = {
        "watcher": kube.service_account_kubeconfig(
            admin_api,
            namespace=namespace,
            name="splitsched-watcher",
            cluster_role_rules=WATCHER_RULES,
            directory=directory,
        ),
        "binder": kube.service_account_kubeconfig(
            admin_api,
            namespace=namespace,
            name="splitsched-binder",
            cluster_role_rules=BINDER_RULES,
            directory=directory,
        ),
    }
    if with_scheduler:
        configs["scheduler"] = kube.service_account_kubeconfig(
            admin_api,
            namespace=namespace,
            name="splitsched-scheduler",
            cluster_role_rules=SCHEDULER_RULES,
            directory=directory,
        )
    return configs


@dataclass
class Stack:
    workdir: Path
    watcher_kubeconfig: Path
    binder_kubeconfig: Path
    binders: int = 2
    scheduler_args: Sequence[str] = ()
    binder_args: Sequence[str] = ()
    watcher_args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    # More than one: leader election on the Lease `lease_namespace`/splitsched-scheduler,
    # with `scheduler_kubeconfig` (SCHEDULER_RULES).
    schedulers: int = 1
    scheduler_kubeconfig: Path | None = None
    lease_namespace: str = ""
    # The (first) scheduler's gRPC port when it is free (the demo asks for the documented
    # 50050); 0 or taken: a free one.
    scheduler_port: int = 0
    # Mutual TLS on every hop (see the module doc): True makes the certificates in
    # `workdir/tls` at start, a Path uses those in it, False is plaintext (debugging only).
    tls: Path | bool = True

    @property
    def tls_dir(self) -> Path | None:
        """Where the CA, the services' and the clients' certificates are; None in plaintext."""
        if isinstance(self.tls, Path):
            return self.tls
        return self.workdir / "tls" if self.tls else None

    def tls_args(self, component: str) -> list[str]:
        """The TLS and trusted-client flags of ``component`` (watcher, scheduler, binder),
        for this stack's services and for any extra one a test starts beside them."""
        return processes.tls_args(component, self.tls_dir)

    def _service(
        self, name: str, module: str, args: Sequence[str], *, grpc_port: int | None = None
    ) -> Service:
        """``python -m MODULE`` on loopback ports (``grpc_port``, or a free one), run through
        orphanguard, with this component's TLS flags."""
        grpc_port = grpc_port or controlplane.free_port()
        http_port = controlplane.free_port()
        argv = processes.service_argv(
            module,
            listen=f"127.0.0.1:{grpc_port}",
            http_port=http_port,
            args=[*self.tls_args(name.partition("-")[0]), *args],
        )
        return Service(name, argv, self.workdir / f"{name}.log", grpc_port, http_port)

    def _start(self, svc: Service, *, append: bool = False) -> Service:
        """Run ``svc``, its output to its log: a new log per run (a kept work dir's old
        one would name dead ports first), or with ``append`` the same one (a restart)."""
        processes.start(svc, env=self.env, cwd=controlplane.REPO_ROOT, append=append)
        self.services.append(svc)
        return svc

    def _wait_ready(self, svcs: Sequence[Service], timeout: float) -> None:
        processes.wait_ready(svcs, timeout=timeout)

    @property
    def watcher(self) -> Service:
        return next(s for s in self.services if s.name == "watcher")

    @property
    def scheduler_services(self) -> list[Service]:
        return [s for s in self.services if s.name.partition("-")[0] == "scheduler"]

    @property
    def scheduler(self) -> Service:
        """The scheduler; of several replicas, the one that is ready (the leader), else the
        first."""
        replicas = self.scheduler_services
        if len(replicas) > 1:
            return next((s for s in replicas if s.alive() and s.ready()), replicas[0])
        return replicas[0]

    def wait_leader(self, *, timeout: float) -> Service:
        """Wait until one scheduler replica is ready (leads, synced, a binder SERVING)."""
        deadline = time.monotonic() + timeout
        while True:
            replicas = self.scheduler_services
            for svc in replicas:
                if svc.alive() and svc.ready():
                    return svc
            if not any(s.alive() for s in replicas):
                tails = "\n".join(f"{s.name}:\n{s.log_tail()}" for s in replicas)
                raise RuntimeError(f"every scheduler exited:\n{tails}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no scheduler leads after {timeout}s")
            time.sleep(0.1)

    @property
    def binder_services(self) -> list[Service]:
        return [s for s in self.services if s.name.startswith("binder")]

    def start(self, *, timeout: float = 60.0) -> Stack:
        """Start the watcher, the binders, then the schedulers; return once every one is
        ready (with several schedulers: once one leads and the others answer /healthz).
        On any failure stop what was started."""
        if self.schedulers > 1 and (self.scheduler_kubeconfig is None or not self.lease_namespace):
            raise ValueError("several schedulers need scheduler_kubeconfig and lease_namespace")
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.tls is True:
            assert self.tls_dir is not None
            certs.write_stack_certs(self.tls_dir)
        try:
            watcher = self._start(self._watcher())
            scheduler_ports = [
                controlplane.free_port(preferred=self.scheduler_port if i == 0 else 0)
                for i in range(self.schedulers)
            ]
            binders = [self._start(self._binder(i, scheduler_ports)) for i in range(self.binders)]
            schedulers = [
                self._start(self._scheduler(i, port, watcher=watcher, binders=binders))
                for i, port in enumerate(scheduler_ports)
            ]
            self._wait_started(watcher, binders, schedulers, timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _watcher(self) -> Service:
        args = ["--kubeconfig", str(self.watcher_kubeconfig), *self.watcher_args]
        return self._service("watcher", "services.watcher", args)

    def _binder(self, index: int, scheduler_ports: Sequence[int]) -> Service:
        """Binder ``index``, reporting to every scheduler replica (with several, an
        ``ipv4:a,b`` target whose channel picks the SERVING one)."""
        target = ",".join(f"127.0.0.1:{p}" for p in scheduler_ports)
        if self.schedulers > 1:
            target = f"ipv4:{target}"
        name = f"binder-{index}"
        args = ["--kubeconfig", str(self.binder_kubeconfig), "--scheduler", target]
        return self._service(
            name, "services.binder", [*args, "--binder-id", name, *self.binder_args]
        )

    def _scheduler(
        self, index: int, grpc_port: int, *, watcher: Service, binders: Sequence[Service]
    ) -> Service:
        """Scheduler replica ``index`` on ``grpc_port`` (the port the binders were given);
        with several replicas, under leader election."""
        ha = self.schedulers > 1
        election = []
        if ha:
            election = ["--leader-elect", "--kubeconfig", str(self.scheduler_kubeconfig)]
            election += ["--lease-namespace", self.lease_namespace]
        targets = ",".join(b.grpc_target for b in binders)
        args = ["--watcher", watcher.grpc_target, "--binders", f"ipv4:{targets}"]
        args += ["--scheduler-id", f"scheduler-{index}", *election, *self.scheduler_args]
        name = f"scheduler-{index}" if ha else "scheduler"
        return self._service(name, "services.scheduler", args, grpc_port=grpc_port)

    def _wait_started(
        self,
        watcher: Service,
        binders: Sequence[Service],
        schedulers: Sequence[Service],
        *,
        timeout: float,
    ) -> None:
        if len(schedulers) <= 1:
            self._wait_ready([watcher, *binders, *schedulers], timeout)
            return
        self._wait_ready([watcher, *binders], timeout)
        self.wait_leader(timeout=timeout)
        for svc in schedulers:
            kube.wait_for(svc.live, timeout=timeout, interval=0.1, message=f"{svc.name} /healthz")

    def channel_credentials(self, who: str = "ops") -> grpc.ChannelCredentials | None:
        """Mutual-TLS credentials with ``who``'s certificate (one of
        certs.STACK_COMPONENTS), trusting the stack's CA; None when the stack is plaintext."""
        if self.tls_dir is None:
            return None
        ca, crt, key = (self.tls_dir / f for f in ("ca.crt", f"{who}.crt", f"{who}.key"))
        return grpc.ssl_channel_credentials(
            root_certificates=ca.read_bytes(),
            private_key=key.read_bytes(),
            certificate_chain=crt.read_bytes(),
        )

    def channel(
        self,
        target: str | None = None,
        *,
        who: str = "ops",
        options: Sequence[tuple[str, Any]] = (),
    ) -> grpc.Channel:
        """A channel to ``target`` (default: the scheduler) as ``who``: what a client of
        this stack must use, since the servers require a client certificate."""
        target = target or self.scheduler.grpc_target
        creds = self.channel_credentials(who)
        if creds is None:
            return grpc.insecure_channel(target, options=options)
        return grpc.secure_channel(target, creds, options=options)

    def cli_env(self, who: str = "ops") -> dict[str, str]:
        """The environment that makes the CLI (and examples/go-client) talk mutual TLS to
        this stack as ``who``: SPLITSCHED_CA, _CERT, _KEY; empty when plaintext."""
        if self.tls_dir is None:
            return {}
        d = self.tls_dir
        return {
            "SPLITSCHED_CA": str(d / "ca.crt"),
            "SPLITSCHED_CERT": str(d / f"{who}.crt"),
            "SPLITSCHED_KEY": str(d / f"{who}.key"),
        }

    def stop(self, *, grace: float = 15.0) -> None:
        processes.stop(self.services, grace=grace)
        self.services.clear()

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class RestartableStack(Stack):
    """A ``Stack`` whose services can be killed with SIGKILL or stopped gracefully, and
    started again with the same command line (same ports, so peers reconnect to the same
    address): the fault tier's kills and the soak's rolling restarts."""

    def kill(self, svc: Service) -> None:
        assert svc.proc is not None and svc.alive(), f"{svc.name} is not running"
        svc.proc.send_signal(signal.SIGKILL)
        svc.proc.wait(timeout=10)
        with svc.log_path.open("a") as log:
            log.write(f"\n===== {svc.name} killed with SIGKILL by the fault test =====\n")

    def stop_one(self, svc: Service, *, grace: float = 15.0) -> None:
        """SIGTERM (SIGKILL after ``grace``), as a rolling restart or a drained node does."""
        processes.stop([svc], grace=grace)

    def restart(self, svc: Service, *, timeout: float = 60.0, wait_ready: bool = True) -> None:
        """Start a stopped ``svc`` again on its ports, appending to its log; with
        ``wait_ready`` False only wait until it answers /healthz (a standby scheduler)."""
        assert not svc.alive(), f"{svc.name} still runs"
        self.services.remove(svc)
        self._start(svc, append=True)  # appends it again, to the same log
        if wait_ready:
            self._wait_ready([svc], timeout)
        else:
            kube.wait_for(svc.live, timeout=timeout, interval=0.1, message=f"{svc.name} /healthz")

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)

    def tracebacks(self) -> str:
        out = []
        for svc in self.services:
            text = svc.log_path.read_text(errors="replace") if svc.log_path.exists() else ""
            if "Traceback" in text:
                out.append(f"--- {svc.name} log (has a traceback) ---\n{text[-5000:]}")
        return "\n".join(out)
