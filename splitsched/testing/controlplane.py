"""The real local control plane: etcd, kube-apiserver and kwok as processes on loopback.

Used by the integration and e2e test fixtures (``tests/support/fixtures.py``), the demo and
the benchmarks, and by ``make cluster-up|cluster-down|cluster-status`` through the CLI::

    python -m splitsched.testing.controlplane up|down|status

``up`` builds or reuses the binaries (``scripts/get-binaries.sh``, versions pinned in
``scripts/versions.env``), generates a CA, serving and client certificates with the
``openssl`` CLI, starts etcd, then kube-apiserver with secure serving, ``Node,RBAC``
authorization and service-account token signing, waits for ``/readyz``, writes an admin
kubeconfig to ``<state-dir>/admin.kubeconfig`` and starts kwok, which plays the kubelet for
nodes annotated ``kwok.x-k8s.io/node=fake`` (marks them Ready, moves bound pods to Running).

Every process gets a PID file and a log file in the state dir (default
``<repo>/.local-cluster``, or ``$SPLITSCHED_CLUSTER_DIR``); ``down`` stops exactly those
PIDs. There is no kube-controller-manager: no ServiceAccount token Secrets (use the
TokenRequest API), no garbage collection and no namespace finalization (see
``splitsched.testing.kube.delete_namespace``). etcd data is wiped on every fresh ``up``.
This is dev/test tooling, not part of the scheduler.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO_ROOT / "scripts"
VERSIONS_FILE = SCRIPTS_DIR / "versions.env"
GET_BINARIES = SCRIPTS_DIR / "get-binaries.sh"

#: The annotation kwok selects the nodes it manages by (``key=value``).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
COMPONENTS = ("etcd", "kube-apiserver", "kwok")
STATE_FILE = "state.json"


class ControlPlaneError(RuntimeError):
    """The control plane could not be started, or a binary is missing."""


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Parse ``scripts/versions.env`` (plain ``KEY=VALUE`` lines, ``#`` comments)."""
    versions: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        versions[key.strip()] = value.strip()
    return versions


def cache_root() -> Path:
    """Where get-binaries.sh caches binaries (shared by every clone on the machine)."""
    if env := os.environ.get("SPLITSCHED_CACHE"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "splitsched"


def binary_versions() -> dict[str, str]:
    """Binary name -> pinned version."""
    v = read_versions()
    return {
        "kube-apiserver": v["KUBERNETES_VERSION"],
        "kube-scheduler": v["KUBERNETES_VERSION"],
        "etcd": v["ETCD_VERSION"],
        "kwok": v["KWOK_VERSION"],
        "helm": v["HELM_VERSION"],
    }


def binary_path(name: str) -> Path:
    """The cached path of one control-plane binary (which may not exist yet)."""
    version = binary_versions()[name]
    return cache_root() / "bin" / f"{name}-{version}" / name


def kwok_stages_dir() -> Path:
    """kwok's default Stage configs, copied next to the kwok binary by get-binaries.sh."""
    return binary_path("kwok").parent / "stages"


def binaries_present(names: Sequence[str] = COMPONENTS) -> bool:
    """True when the named binaries (and, for kwok, its stages) are already in the cache."""
    return all(binary_path(n).is_file() for n in names) and (
        "kwok" not in names or (kwok_stages_dir() / ".complete").is_file()
    )


def ensure_binaries(names: Sequence[str] = COMPONENTS) -> None:
    """Run scripts/get-binaries.sh for the named binaries unless all are cached."""
    if binaries_present(names):
        return
    print(
        "controlplane: control-plane binaries missing; running scripts/get-binaries.sh "
        "(the first build takes several minutes)",
        file=sys.stderr,
        flush=True,
    )
    result = subprocess.run(
        ["bash", str(GET_BINARIES), *names], stdout=subprocess.DEVNULL, check=False
    )
    if result.returncode != 0 or not binaries_present(names):
        raise ControlPlaneError(
            f"scripts/get-binaries.sh failed (exit {result.returncode}); see its output above"
        )


def default_state_dir() -> Path:
    """``$SPLITSCHED_CLUSTER_DIR`` or ``<repo>/.local-cluster``."""
    env = os.environ.get("SPLITSCHED_CLUSTER_DIR")
    return Path(env).resolve() if env else REPO_ROOT / ".local-cluster"


_PORT_PICKER = random.Random()
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now. Chosen below Linux's
    ephemeral range (32768 and up): a port the kernel picks for some outgoing connection
    could otherwise be taken between this check and the service binding it."""
    for _ in range(100):
        port = _PORT_PICKER.randrange(20000, 32000)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        fallback: int = s.getsockname()[1]
        return fallback


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def pid_cmdline(pid: int) -> list[str]:
    """The argv of a running process (empty when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL the child when the process that started it dies (Linux).

    SIGKILL, not SIGTERM: all three die at once, and a kube-apiserver whose etcd vanished
    hangs in graceful shutdown. The state is throwaway anyway.
    """
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed: {result.stderr.strip()}")


@dataclass
class ControlPlaneState:
    """What ``up`` started: ports, PIDs and the API server URL (``state.json``)."""

    etcd_client_port: int
    etcd_peer_port: int
    apiserver_port: int
    kwok_port: int
    pids: dict[str, int] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def server_url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"


class ControlPlane:
    """etcd + kube-apiserver + kwok in ``state_dir``; ``up()``, ``down()``, ``status()``."""

    def __init__(
        self, state_dir: Path | str | None = None, *, die_with_parent: bool = False
    ) -> None:
        """``die_with_parent``: children get SIGTERM if this Python process dies (fixtures)."""
        self.state_dir = Path(state_dir).resolve() if state_dir else default_state_dir()
        self.die_with_parent = die_with_parent

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
        return self.state_dir / "logs" / f"{component}.log"

    def pid_path(self, component: str) -> Path:
        return self.state_dir / f"{component}.pid"

    @property
    def server_url(self) -> str:
        """``https://127.0.0.1:<port>`` of the running kube-apiserver."""
        state = self.load_state()
        if state is None:
            raise ControlPlaneError(f"no control plane state in {self.state_dir}; run up() first")
        return state.server_url

    # -- state -------------------------------------------------------------------------

    def load_state(self) -> ControlPlaneState | None:
        try:
            data = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None
        return ControlPlaneState(**data)

    def _save_state(self, state: ControlPlaneState) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
        tmp.replace(self.state_path)

    def _read_pid(self, component: str) -> int | None:
        try:
            return int(self.pid_path(component).read_text().strip())
        except (OSError, ValueError):
            return None

    def _running_pid(self, component: str) -> int | None:
        """The recorded PID of ``component`` if that process still runs our binary."""
        pid = self._read_pid(component)
        if pid is None or not pid_alive(pid):
            return None
        argv = pid_cmdline(pid)
        if not argv or Path(argv[0]).name != component:
            return None  # the PID was reused by something else
        return pid

    # -- status ------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Which components run (PIDs), the server URL, and whether /readyz answers ok."""
        state = self.load_state()
        components = {c: self._running_pid(c) for c in COMPONENTS}
        ready = False
        if state is not None and components["kube-apiserver"] is not None:
            ready = self._apiserver_ready(state, timeout=3.0)
        return {
            "state_dir": str(self.state_dir),
            "server_url": state.server_url if state else None,
            "kubeconfig": str(self.kubeconfig_path) if state else None,
            "components": components,
            "ready": ready,
            "healthy": ready and all(pid is not None for pid in components.values()),
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
        ensure_binaries()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "logs").mkdir(exist_ok=True)
        self._make_pki()
        state = ControlPlaneState(
            etcd_client_port=free_port(),
            etcd_peer_port=free_port(),
            apiserver_port=free_port(),
            kwok_port=free_port(),
            versions=binary_versions(),
        )
        self._save_state(state)
        self._write_kubeconfig(state)
        try:
            self._start_etcd(state, deadline=time.monotonic() + timeout)
            self._start_apiserver(state, deadline=time.monotonic() + timeout)
            self._start_kwok(state, deadline=time.monotonic() + timeout)
        except BaseException:
            self.down()
            raise
        return state

    def _spawn(self, component: str, argv: Sequence[str], state: ControlPlaneState) -> int:
        log = self.log_path(component).open("ab")
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.state_dir,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )
        finally:
            log.close()
        self.pid_path(component).write_text(f"{proc.pid}\n")
        state.pids[component] = proc.pid
        self._save_state(state)
        return proc.pid

    def _wait(
        self,
        component: str,
        pid: int,
        check: Callable[[], bool],
        *,
        deadline: float,
    ) -> None:
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                _reap(pid)
                raise ControlPlaneError(
                    f"{component} exited during startup; last log lines:\n{self._tail(component)}"
                )
            if check():
                return
            time.sleep(0.25)
        raise ControlPlaneError(
            f"{component} not ready in time; last log lines:\n{self._tail(component)}"
        )

    def _tail(self, component: str, lines: int = 30) -> str:
        try:
            text = self.log_path(component).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _start_etcd(self, state: ControlPlaneState, *, deadline: float) -> None:
        data_dir = self.state_dir / "etcd-data"
        shutil.rmtree(data_dir, ignore_errors=True)
        client = f"http://127.0.0.1:{state.etcd_client_port}"
        peer = f"http://127.0.0.1:{state.etcd_peer_port}"
        pid = self._spawn(
            "etcd",
            [
                str(binary_path("etcd")),
                "--name=splitsched",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=splitsched={peer}",
                "--initial-cluster-state=new",
                # A throwaway test store: skip fsync, it dominates on small machines.
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
            state,
        )

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=2) as resp:
                    body = json.loads(resp.read())
                    return str(body.get("health")) == "true"
            except (OSError, ValueError):
                return False

        self._wait("etcd", pid, healthy, deadline=deadline)

    def _start_apiserver(self, state: ControlPlaneState, *, deadline: float) -> None:
        pki = self.pki_dir
        pid = self._spawn(
            "kube-apiserver",
            [
                str(binary_path("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{state.etcd_client_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={state.apiserver_port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--cert-dir={pki}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                # No kube-controller-manager: the ServiceAccount admission plugin would refuse
                # pods because no "default" ServiceAccount is ever created, and the
                # not-ready taint TaintNodesByCondition puts on new nodes would never be
                # lifted (the node lifecycle controller does that).
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                # Lean for small machines; benchmarks send bursts.
                "--enable-priority-and-fairness=false",
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                "--profiling=false",
                "--v=1",
            ],
            state,
        )
        self._wait(
            "kube-apiserver",
            pid,
            lambda: self._apiserver_ready(state, timeout=2.0),
            deadline=deadline,
        )

    def restart_apiserver(self, *, graceful: bool = True, timeout: float = 120.0) -> None:
        """Stop kube-apiserver (SIGTERM, or SIGKILL when not ``graceful``) and start it again
        on the same port with the same etcd and certificates; returns once ``/readyz`` is
        ok. For the fault tests: open connections and watches break, resourceVersions stay
        valid, no object is lost."""
        state = self.load_state()
        if state is None:
            raise ControlPlaneError(f"no control plane state in {self.state_dir}; run up() first")
        pid = self._running_pid("kube-apiserver")
        if pid is not None:
            if not graceful:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._stop(pid, timeout=timeout)
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

    def _start_kwok(self, state: ControlPlaneState, *, deadline: float) -> None:
        config = self.state_dir / "kwok.yaml"
        texts = [p.read_text() for p in sorted(kwok_stages_dir().glob("*.yaml"))]
        kinds = {
            doc.get("spec", {}).get("resourceRef", {}).get("kind")
            for text in texts
            for doc in yaml.safe_load_all(text)
            if isinstance(doc, dict)
        }
        if not {"Node", "Pod"} <= kinds:
            raise ControlPlaneError(f"kwok node and pod stages missing in {kwok_stages_dir()}")
        config.write_text("\n---\n".join(t.strip() for t in texts) + "\n")
        pid = self._spawn(
            "kwok",
            [
                str(binary_path("kwok")),
                f"--kubeconfig={self.kubeconfig_path}",
                f"--config={config}",
                "--manage-all-nodes=false",
                "--manage-single-node=",
                "--manage-nodes-with-annotation-selector="
                f"{KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
                "--manage-nodes-with-label-selector=",
                "--node-lease-duration-seconds=40",
                "--node-ip=127.0.0.1",
                f"--server-address=127.0.0.1:{state.kwok_port}",
                "--cidr=10.244.0.0/16",
            ],
            state,
        )

        def healthy() -> bool:
            url = f"http://127.0.0.1:{state.kwok_port}/healthz"
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        self._wait("kwok", pid, healthy, deadline=deadline)

    # -- TLS ---------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        """Trusts the local CA and presents the admin client certificate."""
        ctx = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        ctx.load_cert_chain(str(self.pki_dir / "admin.crt"), str(self.pki_dir / "admin.key"))
        return ctx

    def _apiserver_ready(self, state: ControlPlaneState, *, timeout: float) -> bool:
        try:
            ctx = self.ssl_context()
            with urllib.request.urlopen(
                f"{state.server_url}/readyz", timeout=timeout, context=ctx
            ) as resp:
                return bool(resp.status == 200 and resp.read().strip() == b"ok")
        except (OSError, ssl.SSLError, urllib.error.URLError):
            return False

    def _make_pki(self) -> None:
        """CA, apiserver serving cert, admin client cert, service-account key pair."""
        pki = self.pki_dir
        if (pki / ".complete").is_file():
            return
        shutil.rmtree(pki, ignore_errors=True)
        pki.mkdir(parents=True, mode=0o700)
        _openssl(
            "req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-sha256",
            "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650",
            "-subj", "/CN=splitsched-local-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
            cwd=pki,
        )  # fmt: skip
        sans = ",".join(
            [
                "DNS:localhost",
                "DNS:kubernetes",
                "DNS:kubernetes.default",
                "DNS:kubernetes.default.svc",
                "DNS:kubernetes.default.svc.cluster.local",
                "IP:127.0.0.1",
                "IP:10.96.0.1",
            ]
        )
        self._leaf("apiserver", "/CN=kube-apiserver", "serverAuth", sans)
        self._leaf("admin", "/O=system:masters/CN=splitsched-admin", "clientAuth", None)
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
        _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
        for key in pki.glob("*.key"):
            key.chmod(0o600)
        (pki / ".complete").write_text("")

    def _leaf(self, name: str, subject: str, usage: str, sans: str | None) -> None:
        pki = self.pki_dir
        ext = [
            "basicConstraints=critical,CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            f"extendedKeyUsage={usage}",
        ]
        if sans:
            ext.append(f"subjectAltName={sans}")
        (pki / f"{name}.ext").write_text("\n".join(ext) + "\n")
        _openssl(
            "req", "-new", "-nodes", "-newkey", "rsa:2048", "-sha256",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
            cwd=pki,
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "825", "-sha256",
            "-extfile", f"{name}.ext",
            cwd=pki,
        )  # fmt: skip

    def _write_kubeconfig(self, state: ControlPlaneState) -> None:
        """Admin kubeconfig with the CA and client cert embedded (portable to any client)."""
        pki = self.pki_dir
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "splitsched-local",
                    "cluster": {
                        "server": state.server_url,
                        "certificate-authority-data": _b64(pki / "ca.crt"),
                    },
                }
            ],
            "users": [
                {
                    "name": "splitsched-admin",
                    "user": {
                        "client-certificate-data": _b64(pki / "admin.crt"),
                        "client-key-data": _b64(pki / "admin.key"),
                    },
                }
            ],
            "contexts": [
                {
                    "name": "splitsched-local",
                    "context": {"cluster": "splitsched-local", "user": "splitsched-admin"},
                }
            ],
            "current-context": "splitsched-local",
        }
        self.kubeconfig_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig_path.chmod(0o600)

    # -- down --------------------------------------------------------------------------

    def down(self, *, timeout: float = 20.0) -> list[str]:
        """Stop the processes ``up`` started (by PID file), kwok first; returns their names."""
        stopped: list[str] = []
        for component in reversed(COMPONENTS):
            pid = self._running_pid(component)
            if pid is not None:
                self._stop(pid, timeout=timeout)
                stopped.append(component)
            elif (recorded := self._read_pid(component)) is not None:
                _reap(recorded)  # an exited child of ours must not linger as a zombie
            self.pid_path(component).unlink(missing_ok=True)
        self.state_path.unlink(missing_ok=True)
        return stopped

    @staticmethod
    def _stop(pid: int, *, timeout: float) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _reap(pid)
            if not pid_alive(pid):
                return
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while pid_alive(pid):
            _reap(pid)
            time.sleep(0.05)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _reap(pid: int) -> None:
    """Collect ``pid`` if it is our child (so it does not linger as a zombie)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``up`` | ``down`` | ``status``."""
    parser = argparse.ArgumentParser(
        prog="python -m splitsched.testing.controlplane",
        description="Run the local control plane (etcd, kube-apiserver, kwok).",
    )
    parser.add_argument("verb", choices=["up", "down", "status"])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="default: $SPLITSCHED_CLUSTER_DIR or <repo>/.local-cluster",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="status: exit 1 unless every component runs and /readyz is ok",
    )
    args = parser.parse_args(argv)
    cp = ControlPlane(args.state_dir)
    if args.verb == "up":
        if cp.load_state() is not None and cp.is_healthy():
            print(f"control plane already running at {cp.server_url}")
        else:
            start = time.monotonic()
            try:
                cp.up()
            except ControlPlaneError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            print(f"control plane up at {cp.server_url} in {time.monotonic() - start:.1f}s")
        print(f"  kubeconfig: {cp.kubeconfig_path}")
        print(f"  export KUBECONFIG={cp.kubeconfig_path}")
        print(f"  logs:       {cp.state_dir / 'logs'}")
        return 0
    if args.verb == "down":
        stopped = cp.down()
        print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
        return 0
    info = cp.status()
    print(f"state dir:  {info['state_dir']}")
    for component, pid in info["components"].items():
        print(f"  {component:15s} {'running (pid ' + str(pid) + ')' if pid else 'stopped'}")
    if info["server_url"]:
        print(f"server:     {info['server_url']} ({'ready' if info['ready'] else 'NOT ready'})")
        print(f"kubeconfig: {info['kubeconfig']}")
    print("healthy" if info["healthy"] else "not running (or not healthy)")
    return 0 if info["healthy"] or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
