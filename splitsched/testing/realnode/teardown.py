"""Undo what the kubelet, kube-proxy and the CNI plugins did to the host, once their
processes are stopped: iptables chains they added (v4 and v6), mounts under the node's
directories, ``kubepods`` cgroups, network namespaces and directories they created, and the
kernel settings as they were (``host.HostSnapshot``)."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import time
from pathlib import Path

from splitsched.testing.controlplane.processes import pid_alive, pid_cmdline
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


def remove_new_veths(before: host.HostSnapshot) -> None:
    """Host ends of pod veths whose network namespace is gone but not yet destroyed (the
    kernel frees a namespace asynchronously), or whose pod was never torn down."""
    for link in host.links() - before.links:
        if link.startswith("veth"):
            run("ip", "link", "delete", link, check=False)


def remove_created_paths(before: host.HostSnapshot) -> None:
    for path in host.HOST_PATHS:
        if path not in before.paths and Path(path).exists():
            shutil.rmtree(path, ignore_errors=True)


def kill_leftover_containers(containerd_socket: Path, *, timeout: float = 20.0) -> int:
    """When the kubelet could not tear its pods down (it crashed, or pods were recreated
    while it stopped): kill every process in the ``kubepods`` cgroups, then the containerd
    shims of our containerd (they outlive containerd by design). Returns how many."""
    victims = _kubepods_pids()
    for pid in victims:
        _kill(pid)
    shims = [pid for pid, argv in _processes() if _is_our_shim(argv, containerd_socket)]
    for pid in shims:
        _kill(pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in (*victims, *shims)):
        time.sleep(0.2)
    return len(victims) + len(shims)


def _kubepods_pids() -> list[int]:
    pids: set[int] = set()
    for root in host.kubepods_cgroups():
        for procs in Path(root).rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids |= {int(x) for x in procs.read_text().split()}
    return sorted(pids)


def _processes() -> list[tuple[int, list[str]]]:
    pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    return [(pid, pid_cmdline(pid)) for pid in pids]


def _is_our_shim(argv: list[str], socket: Path) -> bool:
    return bool(argv) and "containerd-shim" in Path(argv[0]).name and str(socket) in argv


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
