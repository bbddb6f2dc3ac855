"""Kubeconfigs and the proxy: which API server (and CA) a kubeconfig names, so a proxy can
stand in front of it, and a copy of the kubeconfig that talks to the proxy instead."""

from __future__ import annotations

import base64
import ssl
import tempfile
from pathlib import Path
from typing import Any

import yaml

from splitsched.testing import kubeconfigs


def upstream_of(kubeconfig: Path | str) -> tuple[str, ssl.SSLContext | bool | None]:
    """The server a kubeconfig names and how to verify it: its CA, False when it skips
    verification (or is plain http), None for the system's defaults."""
    cluster = kubeconfigs.current_cluster(yaml.safe_load(Path(kubeconfig).read_text()))
    server = str(cluster["server"])
    return server, _verification(server, cluster)


def _verification(server: str, cluster: dict[str, Any]) -> ssl.SSLContext | bool | None:
    if not server.startswith("https"):
        return None
    if cluster.get("insecure-skip-tls-verify"):
        return False
    if data := cluster.get("certificate-authority-data"):
        return ssl.create_default_context(cadata=base64.b64decode(data).decode())
    if path := cluster.get("certificate-authority"):
        return ssl.create_default_context(cafile=str(path))
    return None


def proxied_kubeconfig(source: Path | str, *, proxy_url: str, dest: Path | None = None) -> Path:
    """A copy of a (bearer-token) kubeconfig whose server is ``proxy_url``, without a CA.

    Client certificates cannot pass through a plain-HTTP proxy: use token kubeconfigs such
    as ``splitsched.testing.stack.component_kubeconfigs`` writes.
    """
    source = Path(source)
    config = yaml.safe_load(source.read_text())
    cluster = kubeconfigs.current_cluster(config)
    for key in ("certificate-authority", "certificate-authority-data", "tls-server-name"):
        cluster.pop(key, None)
    cluster["server"] = proxy_url
    if dest is None:
        dest = Path(tempfile.mkdtemp(prefix="splitsched-proxied-")) / source.name
    return kubeconfigs.write(dest, config)
