"""`make demo`: splitsched scheduling real pods, start to finish.

Starts the local control plane (etcd, kube-apiserver, kwok), 50 kwok nodes of mixed sizes
(some tainted for GPUs, labelled by zone), then `splitsched up` with 2 binders against it,
as a user runs it on their own cluster (`splitsched.demo.upprocess`), and 1,000
pods of mixed shapes with `schedulerName: splitsched` in the namespace `shop` (and one
more held by a scheduling gate: docs/api.md's examples name these pods); shows progress
while they bind, then a summary: bound and pending counts, pods per node,
creation-to-bound latency, how the binders shared the work, and why the unfit and the
gated pods wait (from the Scheduler API).
Stops everything it started on exit, Ctrl-C or SIGTERM.

The services talk mutual TLS with trusted clients, as the Helm chart installs them: `up`
makes a CA and one certificate per component (and an `ops` one for you and the CLI) at
start; `--insecure` runs them plaintext, for debugging only.

`--offline` runs the pure core on examples/sample-cluster.yaml instead: no processes.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from splitsched.demo.offline import SAMPLE, run_offline


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m splitsched.demo [--offline [--cluster FILE]] [--keep] [--insecure]``.
    The live run (``splitsched.demo.live``) is imported only when asked for: it needs the
    test tooling and the kubernetes client, the offline one only the core."""
    parser = argparse.ArgumentParser(prog="python -m splitsched.demo", description=__doc__)
    parser.add_argument("--offline", action="store_true", help="pure core on a sample file")
    parser.add_argument("--cluster", type=Path, default=SAMPLE, help="with --offline")
    parser.add_argument("--keep", action="store_true", help="leave it running until Ctrl-C")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="plaintext gRPC, no client certificates (debugging only: anyone on this "
        "machine may then bind and evict)",
    )
    args = parser.parse_args(argv)
    if args.offline:
        return run_offline(args.cluster)
    from splitsched.demo.live import run_live
    from splitsched.testing.interrupts import stop_like_ctrl_c

    stop_like_ctrl_c()  # a process manager's SIGTERM cleans up as Ctrl-C does
    return run_live(keep=args.keep, tls=not args.insecure)
