"""The node's network on the host: the bridge pods attach to (created before the API server
starts, because the API server serves on its address), and the forward guard, which lets
packets move between pods and the node but never out of the bridge."""

from __future__ import annotations

import subprocess
from pathlib import Path

from splitsched.testing.realnode.layout import NodeLayout

GUARD_CHAIN = "SPLITSCHED-NODE-FWD"


class HostCommandError(RuntimeError):
    """A host command (ip, iptables, mount) failed."""


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise HostCommandError(f"{' '.join(argv)}: {result.stderr.strip() or result.stdout}")
    return result


def bridge_up(layout: NodeLayout) -> None:
    """The bridge with the node's address; idempotent."""
    if run("ip", "link", "show", layout.bridge, check=False).returncode != 0:
        run("ip", "link", "add", layout.bridge, "type", "bridge")
    address = f"{layout.bridge_ip}/{layout.bridge_prefix}"
    addrs = run("ip", "-o", "-4", "addr", "show", "dev", layout.bridge).stdout
    if address not in addrs:
        run("ip", "addr", "add", address, "dev", layout.bridge)
    run("ip", "link", "set", layout.bridge, "up")


def bridge_down(layout: NodeLayout) -> None:
    if run("ip", "link", "show", layout.bridge, check=False).returncode == 0:
        run("ip", "link", "delete", layout.bridge)


def guard_rules(layout: NodeLayout) -> list[list[str]]:
    """The guard chain's rules: traffic between two ports of the bridge (a pod reaching a
    Service's pod, routed through the node) passes; anything else entering or leaving the
    bridge is dropped, so no pod packet is forwarded to another interface."""
    b = layout.bridge
    return [
        ["-i", b, "-o", b, "-j", "ACCEPT"],
        ["-i", b, "-j", "DROP"],
        ["-o", b, "-j", "DROP"],
    ]


def guard_up(layout: NodeLayout) -> None:
    """Insert the guard first in FORWARD (before kube-proxy's and anything else's rules)."""
    guard_down(layout)
    run("iptables", "-N", GUARD_CHAIN)
    for rule in guard_rules(layout):
        run("iptables", "-A", GUARD_CHAIN, *rule)
    run("iptables", "-I", "FORWARD", "1", "-j", GUARD_CHAIN)
    # Routing between pods through the node (Service traffic) needs forwarding on; the
    # guard keeps it inside the bridge, and teardown puts the old value back.
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")


def guard_down(layout: NodeLayout) -> None:
    while run("iptables", "-D", "FORWARD", "-j", GUARD_CHAIN, check=False).returncode == 0:
        pass
    if run("iptables", "-L", GUARD_CHAIN, "-n", check=False).returncode == 0:
        run("iptables", "-F", GUARD_CHAIN)
        run("iptables", "-X", GUARD_CHAIN)
