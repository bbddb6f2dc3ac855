"""``python -m splitsched.testing.realnode up|down|status|check``: the real node from a
shell, for trying the chart by hand the way the tier does (README, "Install with Helm")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from splitsched.testing.controlplane import ControlPlaneError, binary_path
from splitsched.testing.realnode import packages
from splitsched.testing.realnode.cluster import RealCluster
from splitsched.testing.realnode.lock import machine_lock


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m splitsched.testing.realnode",
        description="A control plane and a real node (kubelet + containerd) on this machine.",
    )
    parser.add_argument("verb", choices=["up", "down", "status", "check"])
    args = parser.parse_args(argv)
    cluster = RealCluster()
    if args.verb == "status":
        for name, pid in cluster.node().running().items() if _has_state(cluster) else ():
            print(f"  {name:12s} {'running (pid ' + str(pid) + ')' if pid else 'stopped'}")
        print(f"control plane: {cluster.control_plane.status()}")
        return 0
    if args.verb == "check":
        left = cluster.leftovers()
        print("\n".join(left) if left else "the host is as it was before `up`")
        return 1 if left else 0
    if args.verb == "down":
        print(f"stopped: {', '.join(cluster.down()) or 'nothing'}")
        return 0
    return _up(cluster)


def _has_state(cluster: RealCluster) -> bool:
    return cluster.control_plane.load_state() is not None


def _up(cluster: RealCluster) -> int:
    reason = packages.why_unusable()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    with machine_lock():
        try:
            cluster.up()
        except ControlPlaneError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    print(f"real node {cluster.layout.node_name} Ready; phases (s): {cluster.phases}")
    print(f"  export KUBECONFIG={cluster.kubeconfig_path}")
    tools = (binary_path("kubectl").parent, binary_path("helm").parent)
    print(f"  export PATH={tools[0]}:{tools[1]}:$PATH")
    print(f"  containerd: {cluster.layout.containerd_socket}")
    print("  stop with: python -m splitsched.testing.realnode down")
    return 0
