"""``RealNode``: containerd, the kubelet, kube-proxy and CoreDNS as host processes, joined
to a control plane running in real-node mode. Started in that order, stopped in reverse,
by PID file (``controlplane.processes.ProcessFiles``)."""

from __future__ import annotations

import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from splitsched.testing import kubeconfigs
from splitsched.testing.controlplane import binaries, pki
from splitsched.testing.controlplane.processes import ProcessFiles
from splitsched.testing.realnode import configs
from splitsched.testing.realnode.layout import NodeLayout

#: Start order; ``stop`` goes in reverse.
PROCESSES = ("containerd", "kubelet", "kube-proxy", "coredns")


class RealNode:
    """The node's processes in ``layout.node_dir``."""

    def __init__(self, layout: NodeLayout, *, server_url: str) -> None:
        self.layout = layout
        self.server_url = server_url
        self.processes = ProcessFiles(layout.node_dir)

    def start_containerd(self, *, timeout: float = 60.0) -> None:
        d = self.layout.containerd_dir
        d.mkdir(parents=True, exist_ok=True)
        self.layout.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        (self.layout.cni_conf_dir / "10-splitsched.conflist").write_text(
            configs.cni_conflist(self.layout)
        )
        config = d / "config.toml"
        config.write_text(configs.containerd_config(self.layout))
        argv = ["/usr/bin/containerd", f"--config={config}"]
        self._start("containerd", argv, self._containerd_ready, timeout)

    def _containerd_ready(self) -> bool:
        result = subprocess.run(
            ["ctr", f"--address={self.layout.containerd_socket}", "version"],
            capture_output=True,
            check=False,
        )
        return result.returncode == 0

    def start_kubelet(self, *, timeout: float = 120.0) -> None:
        layout = self.layout
        layout.kubelet_dir.mkdir(parents=True, exist_ok=True)
        layout.pod_logs_dir.mkdir(parents=True, exist_ok=True)
        pki.leaf(
            layout.pki_dir,
            "node",
            f"/O=system:nodes/CN=system:node:{layout.node_name}",
            "clientAuth",
            None,
        )
        kubeconfig = self._kubeconfig("node")
        resolv = layout.node_dir / "resolv.conf"
        resolv.write_text(configs.resolv_conf(layout))
        config = layout.node_dir / "kubelet.yaml"
        config.write_text(
            configs.kubelet_config(layout, client_ca=layout.pki_dir / "ca.crt", resolv_conf=resolv)
        )
        argv = [
            str(binaries.binary_path("kubelet")),
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={layout.node_name}",
            f"--node-ip={layout.bridge_ip}",
            f"--root-dir={layout.kubelet_dir}",
            f"--cert-dir={layout.kubelet_dir / 'pki'}",
            "--v=1",
        ]
        url = f"http://127.0.0.1:{layout.kubelet_healthz_port}/healthz"
        self._start("kubelet", argv, lambda: _http_ok(url), timeout)

    def start_kube_proxy(self, *, timeout: float = 60.0) -> None:
        config = self.layout.node_dir / "kube-proxy.yaml"
        config.write_text(
            configs.kube_proxy_config(self.layout, kubeconfig=self._kubeconfig("admin"))
        )
        argv = [str(binaries.binary_path("kube-proxy")), f"--config={config}", "--v=1"]
        url = f"http://127.0.0.1:{self.layout.proxy_healthz_port}/healthz"
        self._start("kube-proxy", argv, lambda: _http_ok(url), timeout)

    def start_coredns(self, *, timeout: float = 60.0) -> None:
        corefile = self.layout.node_dir / "Corefile"
        corefile.write_text(configs.corefile(self.layout, kubeconfig=self._kubeconfig("admin")))
        argv = [str(binaries.binary_path("coredns")), f"-conf={corefile}"]
        url = f"http://127.0.0.1:{self.layout.dns_ready_port}/ready"
        self._start("coredns", argv, lambda: _http_ok(url), timeout)

    def stop(self, *, timeout: float = 30.0) -> list[str]:
        """Stop every process (reverse start order); returns the names that were running."""
        stopped = []
        for name in reversed(PROCESSES):
            if self.processes.stop(name, timeout=timeout):
                stopped.append(name)
        return stopped

    def running(self) -> dict[str, int | None]:
        return {name: self.processes.running_pid(name) for name in PROCESSES}

    def kube_proxy_cleanup(self) -> None:
        """``kube-proxy --cleanup``: its iptables rules and chains, v4 and v6."""
        subprocess.run(
            [str(binaries.binary_path("kube-proxy")), "--cleanup"],
            capture_output=True,
            check=False,
        )

    def _kubeconfig(self, client: str) -> Path:
        path = self.layout.node_dir / f"{client}.kubeconfig"
        kubeconfigs.write(path, pki.client_kubeconfig(self.layout.pki_dir, self.server_url, client))
        return path

    def _start(self, name: str, argv: list[str], ready: Callable[[], bool], timeout: float) -> None:
        (self.layout.node_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.processes.stop(name, timeout=10.0)
        pid = self.processes.spawn(name, argv)
        self.processes.wait_ready(name, pid, ready, deadline=time.monotonic() + timeout)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, ssl.SSLError):
        return False
