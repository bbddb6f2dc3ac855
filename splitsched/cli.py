"""`splitsched`: the command-line entry point.

`splitsched simulate --cluster FILE` runs the pure core offline on what `kubectl get
nodes,pods -A -o yaml` prints (with pvc,pv,storageclasses,csinodes for pods with
volumes): bound pods are loaded as allocated, pending pods are scheduled in queue order,
one JSON line per pending pod, then a summary line.
`splitsched simulate -f pod.yaml`, `pods`, `explain`, `nodes` and `watch` ask a running
scheduler (`splitsched.apiclient`). `splitsched up --kubeconfig PATH` runs the services
locally against a cluster (`splitsched.up`, with its own exit codes).
Exit codes: 0 done, 1 a negative answer (a pod does not fit), 2 bad input (the message
names the object and field), 3 the server failed or is unreachable, 4 not found, 5 the
server refused this client's identity (PERMISSION_DENIED or UNAUTHENTICATED), 141 the
reader of the output left (a closed pipe, as `| head` does), quietly.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from splitsched import apiclient, up
from splitsched.apiclient import EXIT_BAD_INPUT, EXIT_OK

#: 128 + SIGPIPE, what a shell reports for a tool whose reader left.
EXIT_CLOSED_PIPE = 141

if TYPE_CHECKING:
    from splitsched.core.profiles import SchedulerConfig


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")


def _scheduler_config(path: str | None) -> SchedulerConfig | None:
    """The --config file (none: the default), its notes printed once on stderr; None
    after printing why it cannot be used."""
    from splitsched.core import profiles

    try:
        config = profiles.load_yaml(_read(path) if path else "")
    except (OSError, profiles.ProfileError) as exc:
        print(f"error: scheduler config: {exc}", file=sys.stderr)
        return None
    for note in config.notes:
        print(f"note: scheduler config: {note}", file=sys.stderr)
    return config


def cmd_simulate_offline(args: argparse.Namespace) -> int:
    # Imported here: the API verbs should not pay for numpy and the core on every call.
    import orjson

    from splitsched.core import batch, convert

    try:
        text = _read(args.cluster)
    except OSError as exc:
        print(f"error: cannot read {args.cluster}: {exc.strerror}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        nodes, pods = convert.load_cluster(text)
        storage_objects = convert.load_storage(text)
    except ValueError as exc:
        print(f"error: {args.cluster}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    config = _scheduler_config(args.config)
    if config is None:
        return EXIT_BAD_INPUT
    profs = config.profiles
    names = set(args.scheduler_name or []) or set(profs)
    default = args.scheduler_name[0] if args.scheduler_name else next(iter(profs))
    missing = names - set(profs)
    if missing:
        print(f"error: no profile for schedulerName {sorted(missing)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    bound, pending = batch.split_pods(
        pods, scheduler_names=names, all_pending=args.all_pending, default=default
    )
    algo = batch.build(
        nodes=nodes, bound_pods=bound, profiles=profs, seed=args.seed,
        storage_objects=storage_objects,
    )  # fmt: skip
    out = sys.stdout.buffer
    placed = 0
    started = time.perf_counter()
    for p in batch.schedule_all(algo, pending):
        placed += p.node is not None
        line = {"pod": p.pod.key, "node": p.node, "reasons": dict(p.reasons)}
        if p.node is None:
            line["message"] = p.summary
        out.write(orjson.dumps(line) + b"\n")
    elapsed = time.perf_counter() - started
    summary = {
        "summary": {
            "nodes": len(nodes),
            "bound_before": len(bound),
            "pending": len(pending),
            "placed": placed,
            "unplaced": len(pending) - placed,
            "seconds": round(elapsed, 4),
            "config_notes": list(config.notes),
        }
    }
    out.write(orjson.dumps(summary) + b"\n")
    out.flush()
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="splitsched", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser(
        "simulate",
        help="where would pending pods go (offline with --cluster)",
        description="Schedule the pending pods of a cluster dump offline.",
    )
    sim.add_argument(
        "--cluster",
        help="a Kubernetes List (YAML or JSON) of Nodes and Pods, as `kubectl get "
        "nodes,pods -A -o yaml` prints; - for stdin",
    )
    sim.add_argument(
        "--config",
        help="an unmodified KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file",
    )
    sim.add_argument(
        "--all-pending",
        action="store_true",
        help="schedule every pending pod, whatever its schedulerName",
    )
    sim.add_argument(
        "--scheduler-name",
        action="append",
        help="schedule pending pods with this schedulerName (default: the profiles' names)",
    )
    sim.add_argument("--seed", type=int, default=0, help="tie-break seed (default 0)")
    sim.add_argument(
        "-f",
        "--file",
        action="append",
        help="Pod manifests (YAML/JSON) to place against a running scheduler; - for stdin",
    )
    sim.add_argument("--gang", action="store_true", help="with -f: all or nothing")
    sim.add_argument("--top", type=int, default=3, help="with -f: best nodes to show")
    apiclient.add_client_options(sim)
    sim.set_defaults(func=cmd_simulate)
    apiclient.register(sub)
    up.register(sub)
    return parser


def cmd_simulate(args: argparse.Namespace) -> int:
    if args.cluster and args.file:
        print("error: give either --cluster (offline) or -f (against a server)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.cluster:
        return cmd_simulate_offline(args)
    if not args.file:
        print("error: give --cluster FILE (offline) or -f FILE (against a server)", file=sys.stderr)
        return EXIT_BAD_INPUT
    return apiclient.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _run(argv)
        sys.stdout.flush()  # here, where a closed pipe is still caught
        return code
    except BrokenPipeError:
        return closed_pipe()


def closed_pipe() -> int:
    """`splitsched pods | head`: the reader left. Stop quietly, as Unix tools do, and send
    whatever Python would still flush at exit to /dev/null (the kubectl plugin too)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_CLOSED_PIPE


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.func in (cmd_simulate, up.run):
        code: int = args.func(args)
        return code
    return apiclient.run(args)


if __name__ == "__main__":
    sys.exit(main())
