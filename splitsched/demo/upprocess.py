"""The demo's services, started the way a user starts them: `splitsched up` as a child
process, with a ServiceAccount that has exactly the rights `up` checks for
(`splitsched.up.access.rules`), against the demo's local control plane.

`UpProcess.start` returns once `up` has written its ``services.json`` (every service
ready); `stop` sends it SIGTERM, which stops its services, as a user's Ctrl-C does.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from kubernetes import client

from splitsched.testing import kube
from splitsched.up import access
from splitsched.up.plan import Layout

#: How long `up` may take to have every service ready.
START_TIMEOUT = 180.0


class UpError(RuntimeError):
    """`splitsched up` stopped before its services were ready; the message has its output."""


@dataclass
class UpProcess:
    """A running `splitsched up`: its state dir (certificates, logs, services.json)."""

    state_dir: Path
    log_path: Path
    scheduler_target: str
    tls: bool
    proc: subprocess.Popen[bytes] | None = None
    #: Name -> HTTP URL (/metrics, /readyz) of each service, from services.json.
    http_urls: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(
        cls, api: client.ApiClient, *, state_dir: Path, listen: str, binders: int, tls: bool
    ) -> UpProcess:
        kubeconfig = _identity(api, state_dir)
        log_path = state_dir / "up.log"
        argv = [
            sys.executable, "-m", "splitsched.cli", "up", "--kubeconfig", str(kubeconfig),
            "--state-dir", str(state_dir / "up"), "--listen", listen, "--binders", str(binders),
            *([] if tls else ["--insecure"]),
        ]  # fmt: skip
        running = cls(state_dir / "up", log_path, listen, tls)
        with log_path.open("wb") as log:
            running.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        running._wait_ready()
        return running

    @property
    def layout(self) -> Layout:
        return Layout(self.state_dir)

    @property
    def binder_urls(self) -> dict[str, str]:
        return {n: u for n, u in self.http_urls.items() if n.startswith("binder")}

    def cli_env(self) -> dict[str, str]:
        """What points the CLI at this scheduler as the ``ops`` identity."""
        env = {"SPLITSCHED_SERVER": self.scheduler_target}
        if self.tls:
            tls = self.layout.tls_dir
            env |= {
                "SPLITSCHED_CA": str(tls / "ca.crt"),
                "SPLITSCHED_CERT": str(tls / "ops.crt"),
                "SPLITSCHED_KEY": str(tls / "ops.key"),
            }
        return env

    def channel(self) -> grpc.Channel:
        """A channel to the Scheduler API as the ``ops`` identity."""
        if not self.tls:
            return grpc.insecure_channel(self.scheduler_target)
        tls = self.layout.tls_dir
        creds = grpc.ssl_channel_credentials(
            root_certificates=(tls / "ca.crt").read_bytes(),
            private_key=(tls / "ops.key").read_bytes(),
            certificate_chain=(tls / "ops.crt").read_bytes(),
        )
        return grpc.secure_channel(self.scheduler_target, creds)

    def stop(self, *, grace: float = 30.0) -> None:
        """SIGTERM, as a user's Ctrl-C: `up` stops its services; SIGKILL after ``grace``
        (its services die with it then: `splitsched.launch.orphanguard`)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise UpError(f"splitsched up exited ({self.proc.returncode}):\n{self._output()}")
            if self.layout.services_file.exists():
                listed = json.loads(self.layout.services_file.read_text())
                self.http_urls = {s["name"]: s["http"] for s in listed}
                return
            time.sleep(0.25)
        self.stop()
        raise UpError(f"splitsched up was not ready in {START_TIMEOUT:.0f}s:\n{self._output()}")

    def _output(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def _identity(api: client.ApiClient, state_dir: Path) -> Path:
    """A ServiceAccount with exactly what `up` checks for, and its kubeconfig: the demo runs
    `up` as a platform team would, not as the cluster's admin."""
    namespace = kube.create_namespace(api, prefix="splitsched-system")
    return kube.service_account_kubeconfig(
        api,
        namespace=namespace,
        name="splitsched",
        cluster_role_rules=access.rules(),
        directory=state_dir / "identity",
        expiration_seconds=24 * 3600,
    )
