"""The real local control plane: etcd, kube-apiserver and kwok as processes on loopback.

Used by the integration and e2e test fixtures (``tests/support/fixtures.py``), the demo and
the benchmarks, and by ``make cluster-up|cluster-down|cluster-status`` through the CLI::

    python -m splitsched.testing.controlplane up|down|status

``up`` builds or reuses the binaries (``scripts/get-binaries.sh``, versions pinned in
``scripts/versions.env``), generates a CA, serving and client certificates with the
``openssl`` CLI, starts etcd, then kube-apiserver with secure serving, ``Node,RBAC``
authorization and service-account token signing, waits for ``/readyz``, writes an admin
kubeconfig to ``<state-dir>/admin.kubeconfig``, starts kube-controller-manager and kwok,
which plays the kubelet for nodes annotated ``kwok.x-k8s.io/node=fake`` (marks them Ready,
moves bound pods to Running).

Every process gets a PID file and a log file in the state dir (default
``<repo>/.local-cluster``, or ``$SPLITSCHED_CLUSTER_DIR``); ``down`` stops exactly those
PIDs. kube-controller-manager runs the controllers a scheduler relies on
(``components.CONTROLLERS`` says which and why: the PV binder and the volume protection
controllers, ephemeral volumes, the disruption controller that computes PDB status, the
garbage collector, namespace deletion, ServiceAccounts and their tokens), not the node
lifecycle controller: tests make nodes NotReady on purpose. etcd data is wiped on every
fresh ``up``. This is dev/test tooling, not part of the scheduler.

One module per job: ``binaries`` (versions and the binary cache), ``pki`` (certificates,
the admin kubeconfig), ``components`` (each process's command line and health check),
``processes`` (PID files, logs, ports), ``state`` (``state.json``), ``plane``
(``ControlPlane``, which puts them together) and ``cli``. This package re-exports what
callers use.
"""

from splitsched.testing.controlplane.binaries import (
    REPO_ROOT,
    binaries_present,
    binary_path,
    binary_versions,
    cache_root,
    ensure_binaries,
    kwok_stages_dir,
    read_versions,
)
from splitsched.testing.controlplane.cli import main
from splitsched.testing.controlplane.plane import ControlPlane, default_state_dir
from splitsched.testing.controlplane.processes import (
    die_with_parent,
    free_port,
    pid_alive,
    pid_cmdline,
)
from splitsched.testing.controlplane.state import (
    COMPONENTS,
    ControlPlaneError,
    ControlPlaneState,
)
from splitsched.testing.manifests import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE

__all__ = [
    "COMPONENTS",
    "KWOK_NODE_ANNOTATION",
    "KWOK_NODE_ANNOTATION_VALUE",
    "REPO_ROOT",
    "ControlPlane",
    "ControlPlaneError",
    "ControlPlaneState",
    "binaries_present",
    "binary_path",
    "binary_versions",
    "cache_root",
    "default_state_dir",
    "die_with_parent",
    "ensure_binaries",
    "free_port",
    "kwok_stages_dir",
    "main",
    "pid_alive",
    "pid_cmdline",
    "read_versions",
]
