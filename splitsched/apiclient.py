"""`splitsched` verbs that call a running scheduler's gRPC API: pods, explain, simulate -f,
nodes, watch. Human tables by default (aligned, coloured on a terminal), `-o json|yaml`
for scripts.

Exit codes scripts can rely on: 0 success; 1 the answer is negative (the pod or pods do
not fit, `explain` of a pod that is not pending); 2 bad input; 3 the server could not be
reached or failed; 4 not found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import grpc
import yaml
from google.protobuf import json_format

from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_NOT_FOUND = 4
DEFAULT_SERVER = "127.0.0.1:50050"

_STATE_NAMES = {v: k for k, v in scheduler_pb2.PodState.items()}


def _colour(text: str, code: str) -> str:
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR"):
        return f"\033[{code}m{text}\033[0m"
    return text


_STATE_COLOUR = {"BOUND": "32", "BINDING": "36", "WAITING": "33", "PREEMPTING": "35"}


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    rows = [list(r) for r in rows]
    widths = [len(h) for h in headers]
    for r in rows:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    for r in rows:
        cells = []
        for i, cell in enumerate(r):
            padded = cell.ljust(widths[i])
            if headers[i] == "STATE":
                padded = _colour(padded, _STATE_COLOUR.get(cell, "0"))
            cells.append(padded)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _dump(message: Any, fmt: str) -> str:
    doc = json_format.MessageToDict(message, preserving_proto_field_name=True)
    if fmt == "yaml":
        return str(yaml.safe_dump(doc, sort_keys=False))
    return json.dumps(doc, indent=2)


def _stub(args: argparse.Namespace) -> tuple[grpc.Channel, scheduler_pb2_grpc.SchedulerStub]:
    channel = grpc.insecure_channel(args.server)
    return channel, scheduler_pb2_grpc.SchedulerStub(channel)


def _rpc_error(exc: grpc.RpcError, server: str) -> int:
    code = exc.code()
    detail = exc.details()
    if code == grpc.StatusCode.NOT_FOUND:
        print(f"not found: {detail}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        print(f"invalid: {detail}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"error: scheduler at {server}: {code.name}: {detail}", file=sys.stderr)
    return EXIT_UNAVAILABLE


def _split_pod(ref: str) -> tuple[str, str]:
    if "/" in ref:
        ns, _, name = ref.partition("/")
        return ns, name
    return "default", ref


def cmd_pods(args: argparse.Namespace) -> int:
    channel, stub = _stub(args)
    with channel:
        state = scheduler_pb2.WAITING if args.pending else scheduler_pb2.POD_STATE_UNSPECIFIED
        request = scheduler_pb2.ListPodsRequest(state=state, namespace=args.namespace or "")
        pods: list[scheduler_pb2.PodStatus] = []
        while True:
            resp = stub.ListPods(request, timeout=args.timeout)
            pods.extend(resp.pods)
            if not resp.next_page_token:
                break
            request.page_token = resp.next_page_token
    if args.output != "table":
        print(_dump(scheduler_pb2.ListPodsResponse(pods=pods), args.output))
        return EXIT_OK
    rows = [
        (
            f"{p.pod.namespace}/{p.pod.name}",
            _STATE_NAMES.get(p.state, "?"),
            p.node or "-",
            str(p.scheduling_attempts),
            p.message[:100],
        )
        for p in pods
    ]
    print(table(("POD", "STATE", "NODE", "ATTEMPTS", "MESSAGE"), rows))
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    ns, name = _split_pod(args.pod)
    channel, stub = _stub(args)
    with channel:
        resp = stub.Explain(
            scheduler_pb2.ExplainRequest(namespace=ns, name=name, include_nodes=args.nodes),
            timeout=args.timeout,
        )
    if args.output != "table":
        print(_dump(resp, args.output))
    else:
        print(f"pod {ns}/{name}: {_STATE_NAMES.get(resp.state, '?')}")
        print(f"  {resp.summary}")
        if resp.pod_error:
            print(f"  the pod itself is invalid: {resp.pod_error}")
        print(f"  feasible nodes: {resp.feasible_nodes}/{resp.total_nodes}")
        if resp.plugins:
            rows = []
            for v in resp.plugins:
                reasons = "; ".join(f"{r.nodes} {r.reason}" for r in v.reasons)
                classes = ", ".join(f"{c.node_class} ({c.nodes})" for c in v.node_classes[:3])
                rows.append((v.plugin, str(v.rejected_nodes), reasons, classes))
            print(table(("PLUGIN", "REJECTED", "REASONS", "NODE CLASSES"), rows))
        help_text = "yes" if resp.preemption_might_help else "no"
        print(f"  preemption might help: {help_text}")
        if resp.blocking_group_member:
            print(f"  gang blocked by: {resp.blocking_group_member}")
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    """What-if against the live scheduler: where would these pods go?"""
    manifests = []
    for path in args.file:
        try:
            manifests.append(sys.stdin.read() if path == "-" else Path(path).read_text())
        except OSError as exc:
            print(f"error: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return EXIT_BAD_INPUT
    channel, stub = _stub(args)
    with channel:
        resp = stub.Simulate(
            scheduler_pb2.SimulateRequest(manifests=manifests, gang=args.gang, top_nodes=args.top),
            timeout=args.timeout,
        )
    if args.output != "table":
        print(_dump(resp, args.output))
    else:
        rows = []
        for p in resp.placements:
            top = ", ".join(f"{n.node}={n.total:.0f}" for n in p.top_nodes)
            rows.append((f"{p.pod.namespace}/{p.pod.name}", p.node or "-", top or p.summary))
        print(table(("POD", "NODE", "TOP NODES (SCORE) / WHY NOT"), rows))
    return EXIT_OK if resp.all_placed else EXIT_NEGATIVE


def _fmt_amount(resource: str, amount: int) -> str:
    if resource == "cpu":
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    if resource in ("memory", "ephemeral-storage"):
        for unit, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if amount >= size:
                return f"{amount / size:.1f}{unit}"
    return str(amount)


def cmd_nodes(args: argparse.Namespace) -> int:
    channel, stub = _stub(args)
    nodes: list[scheduler_pb2.NodeView] = []
    with channel:
        request = scheduler_pb2.ListNodesRequest(name_prefix=args.prefix or "")
        while True:
            resp = stub.ListNodes(request, timeout=args.timeout)
            nodes.extend(resp.nodes)
            if not resp.next_page_token:
                break
            request.page_token = resp.next_page_token
    if args.output != "table":
        print(_dump(scheduler_pb2.ListNodesResponse(nodes=nodes), args.output))
        return EXIT_OK
    rows = []
    for n in nodes:

        def used(res: str, node: scheduler_pb2.NodeView = n) -> str:
            alloc = node.allocatable.get(res, 0)
            req = node.requested.get(res, 0)
            pct = f"{100 * req // alloc}%" if alloc else "-"
            return f"{_fmt_amount(res, req)}/{_fmt_amount(res, alloc)} ({pct})"

        taints = ",".join(f"{t.key}:{t.effect}" for t in n.taints) or "-"
        flags = "cordoned" if n.unschedulable else ""
        rows.append((n.name, str(n.pod_count), used("cpu"), used("memory"), taints, flags))
    print(table(("NODE", "PODS", "CPU", "MEMORY", "TAINTS", ""), rows))
    return EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    channel, stub = _stub(args)
    kinds = {v: k for k, v in scheduler_pb2.Decision.Kind.items()}
    with channel:
        stream = stub.WatchDecisions(
            scheduler_pb2.WatchDecisionsRequest(
                namespace=args.namespace or "", include_outcomes=True
            )
        )
        try:
            for d in stream:
                if args.output != "table":
                    print(_dump(d, args.output), flush=True)
                    continue
                when = d.at.ToDatetime().strftime("%H:%M:%S.%f")[:-3]
                print(
                    f"{when}  {kinds.get(d.kind, '?'):<13} {d.pod.namespace}/{d.pod.name}"
                    f"  {d.node or ''}  {d.message[:120]}",
                    flush=True,
                )
        except KeyboardInterrupt:
            stream.cancel()
    return EXIT_OK


def add_client_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server",
        default=os.environ.get("SPLITSCHED_SERVER", DEFAULT_SERVER),
        help=f"scheduler gRPC address (env SPLITSCHED_SERVER; default {DEFAULT_SERVER})",
    )
    p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per call")


def register(sub: Any) -> None:
    pods = sub.add_parser("pods", help="pods the scheduler tracks, with their state")
    pods.add_argument("--pending", action="store_true", help="only pods still waiting")
    pods.add_argument("-n", "--namespace")
    add_client_options(pods)
    pods.set_defaults(func=cmd_pods)

    explain = sub.add_parser("explain", help="why is a pod pending: per plugin and node class")
    explain.add_argument("pod", help="NAMESPACE/NAME (or NAME in default)")
    explain.add_argument("--nodes", action="store_true", help="every node's verdict too")
    add_client_options(explain)
    explain.set_defaults(func=cmd_explain)

    nodes = sub.add_parser("nodes", help="allocatable, requested and free per node")
    nodes.add_argument("--prefix", help="only nodes whose name starts with this")
    add_client_options(nodes)
    nodes.set_defaults(func=cmd_nodes)

    watch_p = sub.add_parser("watch", help="follow decisions and binding outcomes live")
    watch_p.add_argument("-n", "--namespace")
    add_client_options(watch_p)
    watch_p.set_defaults(func=cmd_watch)


def run(args: argparse.Namespace) -> int:
    try:
        code: int = args.func(args)
        return code
    except grpc.RpcError as exc:
        return _rpc_error(exc, getattr(args, "server", ""))
