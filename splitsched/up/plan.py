"""What `splitsched up` starts, as values: the user's choices (`Options`), where its files
go (`Layout`: certificates, logs, the CLI's settings, a lock) and the command line of
each service (`services`): the watcher and N binders with the kubeconfig's identity, the
scheduler with none, every hop mutual TLS unless `--insecure`.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from splitsched.launch import processes
from splitsched.launch.processes import Service


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/splitsched/up``, else ``~/.local/state/splitsched/up``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "splitsched" / "up"


@dataclass(frozen=True)
class Options:
    """What the user asked for, resolved (paths absolute, profiles read)."""

    kubeconfig: Path
    context: str | None
    binders: int
    #: The scheduler's profiles file (``--config``) and the schedulerNames it serves;
    #: () with no file: the default profile, ``splitsched``.
    profiles: Path | None
    scheduler_names: tuple[str, ...]
    #: The Scheduler API's address, ``host:port``.
    listen: str
    state_dir: Path
    tls: bool = True

    @property
    def first_scheduler_name(self) -> str:
        return self.scheduler_names[0] if self.scheduler_names else "splitsched"


@dataclass(frozen=True)
class Layout:
    """The files under the state dir."""

    state_dir: Path

    @property
    def tls_dir(self) -> Path:
        return self.state_dir / "tls"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def cli_env(self) -> Path:
        return self.state_dir / "cli.env"

    @property
    def lock(self) -> Path:
        return self.state_dir / "lock"

    @property
    def services_file(self) -> Path:
        """Each running service's name and loopback addresses (JSON), written once all
        are ready, for tools (the demo reads the binders' /metrics from it)."""
        return self.state_dir / "services.json"


def dial_address(listen: str) -> str:
    """Where local clients reach a server listening on ``listen`` (a wildcard host is
    reached on loopback)."""
    host, _, port = listen.rpartition(":")
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    return f"{host}:{port}"


def cli_environment(opts: Options) -> dict[str, str]:
    """The variables that point the CLI at this scheduler as the ``ops`` identity."""
    env = {"SPLITSCHED_SERVER": dial_address(opts.listen)}
    if opts.tls:
        tls = Layout(opts.state_dir).tls_dir
        env["SPLITSCHED_CA"] = str(tls / "ca.crt")
        env["SPLITSCHED_CERT"] = str(tls / "ops.crt")
        env["SPLITSCHED_KEY"] = str(tls / "ops.key")
    return env


def cli_env_file(opts: Options) -> str:
    """`cli_environment` as shell lines to source (plaintext unsets the TLS ones)."""
    env = cli_environment(opts)
    lines = [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    if not opts.tls:
        lines.append("unset SPLITSCHED_CA SPLITSCHED_CERT SPLITSCHED_KEY")
    return "\n".join(lines) + "\n"


def services(opts: Options, *, free_port: Callable[[], int] = processes.free_port) -> list[Service]:
    """The watcher, the binders and the scheduler, in the order they start."""
    layout = Layout(opts.state_dir)
    tls_dir = layout.tls_dir if opts.tls else None
    kube = ["--kubeconfig", str(opts.kubeconfig)]
    if opts.context:
        kube += ["--context", opts.context]
    names = ["--scheduler-names", ",".join(opts.scheduler_names)] if opts.scheduler_names else []

    def service(name: str, module: str, args: list[str], *, listen: str = "") -> Service:
        listen = listen or f"127.0.0.1:{free_port()}"
        http_port = free_port()
        argv = processes.service_argv(
            module,
            listen=listen,
            http_port=http_port,
            args=[*processes.tls_args(name.partition("-")[0], tls_dir), *args],
        )
        port = int(listen.rpartition(":")[2])
        return Service(name, argv, layout.log_dir / f"{name}.log", port, http_port)

    watcher = service("watcher", "services.watcher", [*kube, *names])
    to_scheduler = ["--scheduler", dial_address(opts.listen)]
    binders = []
    for i in range(opts.binders):
        binder_args = [*kube, *to_scheduler, "--binder-id", f"binder-{i}", *names]
        binders.append(service(f"binder-{i}", "services.binder", binder_args))
    targets = ",".join(b.grpc_target for b in binders)
    scheduler_args = ["--watcher", watcher.grpc_target, "--binders", f"ipv4:{targets}"]
    if opts.profiles is not None:
        scheduler_args += ["--profiles", str(opts.profiles)]
    scheduler = service("scheduler", "services.scheduler", scheduler_args, listen=opts.listen)
    return [watcher, *binders, scheduler]


def services_json(services: Sequence[Service]) -> str:
    """`Layout.services_file`'s text: name, gRPC target and HTTP URL per service."""
    return json.dumps(
        [{"name": s.name, "grpc": s.grpc_target, "http": s.http_url} for s in services],
        indent=2,
    )
