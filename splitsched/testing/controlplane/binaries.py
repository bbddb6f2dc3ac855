"""Which control-plane binaries to run and where they are: the versions pinned in
``scripts/versions.env``, the per-machine cache ``scripts/get-binaries.sh`` fills, and a
check that builds them on first use. Used by ``ControlPlane.up``, the Helm test, the
real-collector test (``otelcol``) and the benchmarks (``binary_path("helm")``,
``binary_path("kube-scheduler")``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from splitsched.testing.controlplane.state import COMPONENTS, ControlPlaneError

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPTS_DIR = REPO_ROOT / "scripts"
VERSIONS_FILE = SCRIPTS_DIR / "versions.env"
GET_BINARIES = SCRIPTS_DIR / "get-binaries.sh"


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
        "kube-controller-manager": v["KUBERNETES_VERSION"],
        "kubelet": v["KUBERNETES_VERSION"],
        "kube-proxy": v["KUBERNETES_VERSION"],
        "kubectl": v["KUBERNETES_VERSION"],
        "coredns": v["COREDNS_VERSION"],
        "otelcol": v["OTELCOL_VERSION"],
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
