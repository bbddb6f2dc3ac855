"""Our images on the real node: ``scripts/build-images.sh`` builds the three service images
and the pause image with podman (no registry, no Docker) and imports them into the node's
containerd, where the kubelet finds them (``pullPolicy: Never``)."""

from __future__ import annotations

import subprocess

from splitsched.testing.controlplane import REPO_ROOT, ControlPlaneError
from splitsched.testing.realnode.layout import NodeLayout

BUILD_IMAGES = REPO_ROOT / "scripts" / "build-images.sh"
#: What the chart renders with ``global.image.registry=localhost``.
REGISTRY = "localhost"


def build_and_import(layout: NodeLayout, *, timeout: float = 1800.0) -> str:
    """Build (or reuse podman's cache) and import into containerd; returns the script's
    report (one line per image, and its phase times on stderr)."""
    result = subprocess.run(
        [
            "bash",
            str(BUILD_IMAGES),
            "--quiet",
            "--containerd-address",
            str(layout.containerd_socket),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise ControlPlaneError(
            f"scripts/build-images.sh failed (exit {result.returncode}):\n"
            + "\n".join(result.stderr.splitlines()[-40:])
        )
    return result.stdout + result.stderr
