"""The real-node tier's fixtures: one control plane with a real node (kubelet, containerd,
kube-proxy, CoreDNS) for the whole tier, our images built and imported, and the Helm chart
installed with the same commands the README's "Install with Helm" gives a user.

Collected only when ``SPLITSCHED_REALNODE=1`` (``make test-realnode``); skipped, saying
why, when not root or when a Debian package cannot be installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from splitsched.testing.controlplane import REPO_ROOT, binary_path
from splitsched.testing.realnode import NodeLayout, RealCluster, images, packages
from splitsched.testing.realnode.lock import machine_lock

RELEASE = "splitsched"
NAMESPACE = "splitsched"
CHART = REPO_ROOT / "helm" / "splitsched"
#: The chart's values for images that exist only in the node's containerd.
IMAGE_VALUES = ("global.image.registry=localhost", "global.image.pullPolicy=Never")


@dataclass
class Tools:
    """kubectl and helm against the real cluster, as a user runs them."""

    kubeconfig: Path

    def run(self, tool: str, *args: str, timeout: float = 300.0) -> str:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        result = subprocess.run(
            [str(binary_path(tool)), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"{tool} {' '.join(args)} failed:\n{result.stderr}")
        return result.stdout

    def kubectl(self, *args: str, timeout: float = 300.0) -> str:
        return self.run("kubectl", *args, timeout=timeout)

    def helm(self, *args: str, timeout: float = 600.0) -> str:
        return self.run("helm", *args, timeout=timeout)


def _phase(phases: dict[str, float], name: str, start: float) -> None:
    phases[name] = round(time.monotonic() - start, 1)
    print(f"realnode: {name} took {phases[name]}s", file=sys.stderr, flush=True)


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealCluster]:
    """The control plane and the real node, up for the whole tier; torn down after it,
    leaving the host as it was (the tier's last test checks)."""
    reason = packages.why_unusable()
    if reason:
        print(f"\nREALNODE TIER SKIPPED: {reason}\n", file=sys.stderr, flush=True)
        pytest.skip(f"real-node tier skipped: {reason}")
    with machine_lock():
        cluster = RealCluster(die_with_parent=True)
        start = time.monotonic()
        cluster.up()
        _phase(cluster.phases, "cluster up (total)", start)
        try:
            start = time.monotonic()
            images.build_and_import(cluster.layout)
            _phase(cluster.phases, "images", start)
            yield cluster
        finally:
            cluster.down()
            cluster.write_record()


@pytest.fixture(scope="session")
def tools(real_cluster: RealCluster) -> Tools:
    return Tools(real_cluster.kubeconfig_path)


@pytest.fixture(scope="session")
def release(real_cluster: RealCluster, tools: Tools) -> str:
    """``helm install --wait`` of the chart from our images; the release's namespace."""
    start = time.monotonic()
    sets = [arg for value in IMAGE_VALUES for arg in ("--set", value)]
    tools.helm(
        "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
        "--wait", "--timeout", "5m", *sets,
    )  # fmt: skip
    _phase(real_cluster.phases, "helm install --wait", start)
    return NAMESPACE


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The time of each phase of the tier (also in <state dir>/phases.json)."""
    record = NodeLayout().state_dir / "phases.json"
    if record.is_file():
        phases = json.loads(record.read_text()).get("phases", {})
        terminalreporter.section("real-node tier: seconds per phase")
        for name, seconds in phases.items():
            terminalreporter.write_line(f"{name:28s} {seconds:7.1f}")
