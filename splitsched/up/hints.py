"""What `splitsched up` prints once everything is ready: where the Scheduler API is, how
the CLI reaches it as the ``ops`` identity, and the next commands to try. Pure text."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from splitsched.launch.processes import Service
from splitsched.up.plan import Layout, Options, dial_address


def ready(opts: Options, services: Sequence[Service], *, context: str) -> str:
    """The text printed when every service is ready."""
    layout = Layout(opts.state_dir)
    security = (
        f"mutual TLS on every hop; certificates in {layout.tls_dir} (the CLI's: ops.crt)"
        if opts.tls
        else "--insecure: plaintext, any local process may make the binders bind and evict"
    )
    kubectl = "kubectl"
    if opts.kubeconfig != Path.home() / ".kube" / "config":
        kubectl += f" --kubeconfig {shlex.quote(str(opts.kubeconfig))}"
    kubectl += f" --context {shlex.quote(context)}"
    name = opts.first_scheduler_name
    lines = [
        f"splitsched is running; the Scheduler API is at {dial_address(opts.listen)}",
        f"  {security}",
        f"  logs: {layout.log_dir}/{{{','.join(s.name for s in services)}}}.log",
        "",
        "The CLI (another terminal) reads its server and certificate from the environment:",
        f"  . {shlex.quote(str(layout.cli_env))}",
        "  splitsched pods --pending",
        "  splitsched explain NAMESPACE/POD",
        "  splitsched nodes",
        "",
        f"Pods with schedulerName: {name} are scheduled here (others stay with the",
        "cluster's own scheduler):",
        f"  {kubectl} apply -f - <<'EOF'",
        "  apiVersion: v1",
        "  kind: Pod",
        "  metadata: {name: hello-splitsched}",
        "  spec:",
        f"    schedulerName: {name}",
        "    containers: [{name: main, image: registry.k8s.io/pause:3.10}]",
        "  EOF",
        f"  {kubectl} get pod hello-splitsched -o wide",
        "",
        "Ctrl-C stops everything.",
    ]
    return "\n".join(lines)
