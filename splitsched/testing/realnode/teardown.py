"""Undo what the kubelet, kube-proxy and the CNI plugins did to the host, once their
processes are stopped: iptables chains they added (v4 and v6), mounts under the node's
directories, ``kubepods`` cgroups, network namespaces and directories they created, and the
kernel settings as they were (``host.HostSnapshot``)."""

from __future__ import annotations

import contextlib
import shlex
import shutil
from pathlib import Path

from splitsched.testing.realnode import host
from splitsched.testing.realnode.network import run


def remove_iptables(before: host.HostSnapshot) -> None:
    """Delete every rule and chain that was not there before: rules jumping to new chains
    first, then the new chains, then new rules left in built-in chains."""
    new = host.iptables_entries() - before.iptables
    chains: dict[tuple[str, str], set[str]] = {}
    for entry in new:
        family, table, kind, rest = entry.split(" ", 3)
        if kind == "chain":
            chains.setdefault((family, table), set()).add(rest)
    for (family, table), names in chains.items():
        _remove_table_chains(family, table, names)
    for entry in host.iptables_entries() - before.iptables:
        family, table, kind, rest = entry.split(" ", 3)
        if kind == "rule":
            cmd = "iptables" if family == "v4" else "ip6tables"
            run(cmd, "-t", table, "-D", *shlex.split(rest)[1:], check=False)


def _remove_table_chains(family: str, table: str, chains: set[str]) -> None:
    cmd = "iptables" if family == "v4" else "ip6tables"
    saved = run(f"{cmd}-save", "-t", table, check=False).stdout
    for line in saved.splitlines():
        if not line.startswith("-A "):
            continue
        spec = shlex.split(line)[1:]
        if spec[0] not in chains and _jump_target(spec) in chains:
            run(cmd, "-t", table, "-D", *spec, check=False)
    for chain in chains:
        run(cmd, "-t", table, "-F", chain, check=False)
    for chain in chains:
        run(cmd, "-t", table, "-X", chain, check=False)


def _jump_target(spec: list[str]) -> str | None:
    for flag in ("-j", "-g"):
        if flag in spec and spec.index(flag) + 1 < len(spec):
            return spec[spec.index(flag) + 1]
    return None


def unmount_under(*prefixes: str) -> None:
    """Unmount everything mounted below ``prefixes``, deepest first (lazily if busy)."""
    for point in sorted(host.mounts_under(*prefixes), key=len, reverse=True):
        if run("umount", point, check=False).returncode != 0:
            run("umount", "-l", point, check=False)


def remove_cgroups(before: host.HostSnapshot) -> None:
    """Remove ``kubepods`` cgroup trees that were not there before, leaves first."""
    for root in host.kubepods_cgroups() - before.cgroups:
        for directory in sorted(Path(root).rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if directory.is_dir():
                with contextlib.suppress(OSError):
                    directory.rmdir()
        with contextlib.suppress(OSError):
            Path(root).rmdir()


def remove_netns_files(before: host.HostSnapshot) -> None:
    """Network namespace files CNI left (their pods were deleted without teardown)."""
    for directory in (Path("/var/run/netns"), Path("/run/netns")):
        if directory.is_dir():
            for ns in directory.glob("cni-*"):
                run("ip", "netns", "delete", ns.name, check=False)


def remove_created_paths(before: host.HostSnapshot) -> None:
    for path in host.HOST_PATHS:
        if path not in before.paths and Path(path).exists():
            shutil.rmtree(path, ignore_errors=True)
