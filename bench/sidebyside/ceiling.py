"""The ceiling contender: ``bench/ceiling`` (Go, standard library only) binds each pending
pod to the next node in turn, with no filter and no score, and writes its Scheduled Event:
the most any scheduler could bind on this control plane and machine. The report gives
each contender's throughput as a fraction of it (issue 19, "the ceiling").

Only meaningful where any node will do (the ``basic`` workload): it ignores every
constraint, so ``bench.sidebyside`` runs it only where ``fits``. The contender itself is
``bench.sidebyside.contenders.Ceiling``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from bench.sidebyside import workloads
from bench.sidebyside.workloads import Workload
from splitsched.core import quantity
from splitsched.runtime import kubeclient
from splitsched.testing import controlplane

NAME = "ceiling"
SCHEDULER_NAME = "bench-ceiling"
SOURCE = Path(__file__).resolve().parent.parent / "ceiling"
#: Bindings in flight (kube-scheduler binds in a goroutine per pod, without a bound).
WORKERS = 128


def binary() -> Path:
    """The ceiling client, built once per version of its source into the binaries' cache."""
    digest = hashlib.sha256()
    for name in ("go.mod", "main.go"):
        digest.update((SOURCE / name).read_bytes())
    path = controlplane.cache_root() / "bin" / f"ceiling-{digest.hexdigest()[:12]}" / "ceiling"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".out")
        env = {**os.environ, "GOFLAGS": "-trimpath", "CGO_ENABLED": "0"}
        subprocess.run(["go", "build", "-o", str(partial), "."], cwd=SOURCE, env=env, check=True)
        partial.rename(path)
    return path


def argv(kubeconfig: Path, *, scheduler_name: str = SCHEDULER_NAME) -> list[str]:
    """The client's command line: the API server and the kubeconfig's client certificate
    (the admin's, as kube-scheduler gets in the bench)."""
    endpoint = kubeclient.load_endpoint(str(kubeconfig))
    if not (endpoint.ca_file and endpoint.cert_file and endpoint.key_file):
        raise RuntimeError(f"{endpoint.source}: the ceiling needs a CA and a client certificate")
    return [
        str(binary()), f"-server={endpoint.host}", f"-ca={endpoint.ca_file}",
        f"-cert={endpoint.cert_file}", f"-key={endpoint.key_file}",
        f"-scheduler-name={scheduler_name}", f"-workers={WORKERS}",
        f"-pods-per-node={pods_per_node()}",
    ]  # fmt: skip


def pods_per_node() -> int:
    """How many of the workloads' pods a node takes: its pod limit, CPU and memory over a
    pod's requests (40 with scheduler_perf's shapes: 4 CPUs of 100m each)."""

    def ratio(node: str, pod: str) -> int:
        share = quantity.parse_quantity(node, field="node") / quantity.parse_quantity(
            pod, field="pod"
        )
        return int(share)

    cpu = ratio(workloads.NODE_CPU, workloads.POD_CPU)
    memory = ratio(workloads.NODE_MEMORY, workloads.POD_MEMORY)
    return min(workloads.NODE_PODS, cpu, memory)


def fits(workload: Workload) -> bool:
    """Whether the ceiling means anything for ``workload``: pods any node may take (no
    affinity, no spread: it places pods anywhere; no devices: it writes no claims), and
    pods to bind (not the idle one)."""
    return not (workload.affinity or workload.spread or workload.idle or workload.devices)
