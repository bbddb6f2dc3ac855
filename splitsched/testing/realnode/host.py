"""What the real node may change on the host, read before the tier starts and compared
after it ends: the kernel settings the kubelet, kube-proxy and CNI change, iptables chains
(v4 and v6), network links, mounts, cgroups and directories. ``HostSnapshot.take()`` reads;
``differences`` says, in words, what was not put back."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Settings the kubelet (at start), kube-proxy or the CNI bridge plugin may change.
SYSCTLS = (
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/ipv6/conf/all/forwarding",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
)
#: Directories the node's parts create outside the tier's state dir when they are missing.
HOST_PATHS = (
    "/var/lib/cni",
    "/var/run/netns",
    "/run/containerd",
    "/var/log/pods",
    "/var/log/containers",
    "/var/lib/kubelet",
    "/etc/cni/net.d",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")


def read_sysctls() -> dict[str, str]:
    """The current value of every ``SYSCTLS`` entry this kernel has."""
    values: dict[str, str] = {}
    for name in SYSCTLS:
        path = Path("/proc/sys") / name
        try:
            values[name] = path.read_text().strip()
        except OSError:
            continue
    return values


def write_sysctls(values: dict[str, str]) -> None:
    for name, value in values.items():
        path = Path("/proc/sys") / name
        try:
            if path.read_text().strip() != value:
                path.write_text(value + "\n")
        except OSError:
            continue


BUILTIN_CHAINS = frozenset({"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"})


def iptables_entries() -> set[str]:
    """Every iptables rule and user chain (v4 and v6), and every built-in chain whose
    policy is not ACCEPT. Empty built-in chains are left out: iptables-nft creates a table
    with its built-in chains the first time anyone lists it, which changes nothing."""
    entries: set[str] = set()
    for family, cmd in (("v4", "iptables-save"), ("v6", "ip6tables-save")):
        try:
            out = subprocess.run([cmd], capture_output=True, text=True, check=False).stdout
        except OSError:
            continue
        entries |= parse_save(family, out)
    return entries


def parse_save(family: str, save_output: str) -> set[str]:
    """``iptables-save`` output as entries: ``v4 nat chain KUBE-SERVICES``,
    ``v4 filter policy FORWARD DROP``, ``v4 nat rule -A PREROUTING -j KUBE-SERVICES``."""
    entries: set[str] = set()
    table = ""
    for line in save_output.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith(":"):
            chain, policy = line[1:].split()[:2]
            if chain not in BUILTIN_CHAINS:
                entries.add(f"{family} {table} chain {chain}")
            elif policy != "ACCEPT":
                entries.add(f"{family} {table} policy {chain} {policy}")
        elif line.startswith("-A "):
            entries.add(f"{family} {table} rule {line}")
    return entries


def links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False)
    return {line.split(":")[1].strip().split("@")[0] for line in out.stdout.splitlines()}


def mounts_under(*prefixes: str) -> set[str]:
    points = set()
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1]
        if any(point == p or point.startswith(p.rstrip("/") + "/") for p in prefixes):
            points.add(point)
    return points


def kubepods_cgroups() -> set[str]:
    """``kubepods`` cgroups, in every hierarchy."""
    found = set()
    if CGROUP_ROOT.is_dir():
        for hierarchy in CGROUP_ROOT.iterdir():
            for name in ("kubepods", "kubepods.slice"):
                if (hierarchy / name).is_dir():
                    found.add(str(hierarchy / name))
    return found


@dataclass(frozen=True)
class HostSnapshot:
    """The host as the tier may change it."""

    sysctls: dict[str, str] = field(default_factory=dict)
    iptables: frozenset[str] = frozenset()
    links: frozenset[str] = frozenset()
    mounts: frozenset[str] = frozenset()
    cgroups: frozenset[str] = frozenset()
    paths: frozenset[str] = frozenset()

    @classmethod
    def take(cls, state_dir: Path) -> HostSnapshot:
        return cls(
            sysctls=read_sysctls(),
            iptables=frozenset(iptables_entries()),
            links=frozenset(links()),
            mounts=frozenset(mounts_under(str(state_dir), "/var/run/netns", "/run/netns")),
            cgroups=frozenset(kubepods_cgroups()),
            paths=frozenset(p for p in HOST_PATHS if Path(p).exists()),
        )


def differences(before: HostSnapshot, after: HostSnapshot) -> list[str]:
    """What ``after`` has that ``before`` did not (or lost), one line each."""
    lines = [
        f"sysctl {name}: {value} before, {after.sysctls.get(name)} after"
        for name, value in sorted(before.sysctls.items())
        if after.sysctls.get(name) != value
    ]
    for what, old, new in (
        ("iptables", before.iptables, after.iptables),
        ("network link", before.links, after.links),
        ("mount", before.mounts, after.mounts),
        ("cgroup", before.cgroups, after.cgroups),
        ("path", before.paths, after.paths),
    ):
        lines += [f"{what} left behind: {x}" for x in sorted(new - old)]
        lines += [f"{what} gone: {x}" for x in sorted(old - new)]
    return lines


def save(snapshot: HostSnapshot, path: Path) -> None:
    data = {
        "sysctls": snapshot.sysctls,
        **{
            name: sorted(getattr(snapshot, name))
            for name in ("iptables", "links", "mounts", "cgroups", "paths")
        },
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def load(path: Path) -> HostSnapshot | None:
    try:
        data = json.loads(path.read_text())
        return _from_json(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _from_json(data: dict[str, Any]) -> HostSnapshot:
    return HostSnapshot(
        sysctls=dict(data["sysctls"]),
        **{
            name: frozenset(data[name])
            for name in ("iptables", "links", "mounts", "cgroups", "paths")
        },
    )
