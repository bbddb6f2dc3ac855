"""The Debian packages the real node needs, installed by the tier itself when it runs as
root; otherwise a sentence saying what is missing (the tier is then skipped, loudly)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

#: Command (or file) -> the Debian package that provides it.
REQUIRED = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "/usr/lib/cni/host-local": "containernetworking-plugins",
    "/usr/lib/cni/portmap": "containernetworking-plugins",
    "podman": "podman",
    "mmdebstrap": "mmdebstrap",
    "iptables": "iptables",
    "ip6tables": "iptables",
    "conntrack": "conntrack",
    "ip": "iproute2",
    "gcc": "gcc",
    "/usr/lib/x86_64-linux-gnu/libc.a": "libc6-dev",  # the static pause binary
    "openssl": "openssl",
}


def missing_packages() -> list[str]:
    """Packages whose command or file is not on this machine, in a stable order."""
    missing: list[str] = []
    for thing, package in REQUIRED.items():
        present = Path(thing).exists() if thing.startswith("/") else shutil.which(thing)
        if not present and package not in missing:
            missing.append(package)
    return missing


def why_unusable() -> str | None:
    """None when the tier can run here; otherwise why not. Installs what is missing first
    when running as root with apt-get."""
    if os.geteuid() != 0:
        return (
            "the real-node tier needs root (a bridge, iptables, cgroups, ports 10250 and 53); "
            f"running as uid {os.geteuid()}"
        )
    missing = missing_packages()
    if missing and shutil.which("apt-get"):
        _apt_install(missing)
        missing = missing_packages()
    if missing:
        return f"Debian packages missing and not installable here: {', '.join(missing)}"
    return None


def _apt_install(packages: list[str]) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    argv = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]
    if subprocess.run(argv, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, check=False)
        subprocess.run(argv, env=env, capture_output=True, check=False)
