"""`splitsched` verbs that call a running scheduler's gRPC API (`splitsched.cli` registers
them): `pods [NS/POD]`, `explain NS/POD`, `simulate -f FILE`, `nodes`, `watch`,
`trace NS/POD`.

Human tables by default (aligned, coloured when stdout is a terminal and NO_COLOR is
unset; `splitsched.cliformat` draws them), `-o json|yaml` for scripts (`watch -o json`
prints one JSON object per line).
`--server` (env SPLITSCHED_SERVER) names the scheduler; `--ca`, `--cert`, `--key` (env
SPLITSCHED_CA, SPLITSCHED_CERT, SPLITSCHED_KEY) switch to TLS, mutual with cert and key;
`--tls` alone uses TLS with the system's roots.

Exit codes scripts can rely on:
  0  success
  1  the answer is negative: a simulated pod (or gang) does not fit; `explain` of a pod
     that is not waiting (gated, already binding, bound or preempting)
  2  bad input: a malformed manifest or argument (the message names the field), an
     unreadable file, a request too large
  3  the server could not be reached, was not ready, or failed
  4  not found: the scheduler does not track that pod
  5  denied: the server refused this client's identity (PERMISSION_DENIED or
     UNAUTHENTICATED); another certificate is needed, retrying will not help
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc

from splitsched import cliformat
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_NOT_FOUND = 4
EXIT_DENIED = 5
DEFAULT_SERVER = "127.0.0.1:50050"
MAX_RESPONSE_BYTES = 64 * 1024 * 1024

_BAD_INPUT_CODES = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,  # the request exceeds the server's message limit
)


class UsageError(Exception):
    """Bad flags or files: exit 2 with this message."""


# ---- connecting ---------------------------------------------------------------------------


def _read_pem(path: str, flag: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror}") from None


def channel_credentials(args: argparse.Namespace) -> grpc.ChannelCredentials | None:
    """TLS credentials from --tls/--ca/--cert/--key, or None for plaintext."""
    if bool(args.cert) != bool(args.key):
        raise UsageError("--cert and --key: give both (mutual TLS) or neither")
    if not (args.tls or args.ca or args.cert):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=_read_pem(args.ca, "--ca") if args.ca else None,
        private_key=_read_pem(args.key, "--key") if args.key else None,
        certificate_chain=_read_pem(args.cert, "--cert") if args.cert else None,
    )


def open_channel(args: argparse.Namespace) -> grpc.Channel:
    options: list[tuple[str, Any]] = [("grpc.max_receive_message_length", MAX_RESPONSE_BYTES)]
    if args.server_name:
        options.append(("grpc.ssl_target_name_override", args.server_name))
    creds = channel_credentials(args)
    if creds is None:
        return grpc.insecure_channel(args.server, options=options)
    return grpc.secure_channel(args.server, creds, options=options)


def _stub(args: argparse.Namespace) -> tuple[grpc.Channel, scheduler_pb2_grpc.SchedulerStub]:
    channel = open_channel(args)
    return channel, scheduler_pb2_grpc.SchedulerStub(channel)


def _rpc_error(exc: grpc.RpcError, server: str) -> int:
    code = exc.code()
    detail = exc.details()
    if code == grpc.StatusCode.NOT_FOUND:
        print(f"not found: {detail}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if code in _BAD_INPUT_CODES:
        print(f"invalid: {detail}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        # Reached and answered: retrying will not help, another identity (certificate) will.
        print(
            f"denied: scheduler at {server} refused this client's identity: {code.name}: {detail}",
            file=sys.stderr,
        )
        return EXIT_DENIED
    print(f"error: scheduler at {server}: {code.name}: {detail}", file=sys.stderr)
    return EXIT_UNAVAILABLE


def _split_pod(ref: str) -> tuple[str, str]:
    ns, sep, name = ref.partition("/")
    if not sep:
        ns, name = "default", ref
    if not ns or not name or "/" in name:
        raise UsageError(f"pod {ref!r}: expected NAMESPACE/NAME (or NAME in default)")
    return ns, name


# ---- verbs --------------------------------------------------------------------------------


def _all_pages(
    call: Callable[[Any], Any], request: Any, items: Callable[[Any], Sequence[Any]]
) -> Iterator[Any]:
    while True:
        resp = call(request)
        yield from items(resp)
        if not resp.next_page_token:
            return
        request.page_token = resp.next_page_token


def cmd_pods(args: argparse.Namespace) -> int:
    if args.pod:
        return _show_pod(args)
    state = scheduler_pb2.POD_STATE_UNSPECIFIED
    if args.state:
        state = scheduler_pb2.PodState.Value(args.state.upper())
    if args.pending:
        state = scheduler_pb2.WAITING
    request = scheduler_pb2.ListPodsRequest(state=state, namespace=args.namespace or "")
    channel, stub = _stub(args)
    with channel:
        pods = list(
            _all_pages(lambda r: stub.ListPods(r, timeout=args.timeout), request, lambda r: r.pods)
        )
    if args.output != "table":
        print(cliformat.dump(scheduler_pb2.ListPodsResponse(pods=pods), args.output))
        return EXIT_OK
    rows = [
        (
            f"{p.pod.namespace}/{p.pod.name}",
            cliformat.state_name(p.state),
            p.node or p.nominated_node or "-",
            str(p.scheduling_attempts),
            p.message[:100],
        )
        for p in pods
    ]
    print(
        cliformat.table(
            ("POD", "STATE", "NODE", "ATTEMPTS", "MESSAGE"),
            rows,
            colours={"STATE": cliformat.state_colour},
        )
    )
    return EXIT_OK


def _show_pod(args: argparse.Namespace) -> int:
    ns, name = _split_pod(args.pod)
    channel, stub = _stub(args)
    with channel:
        p = stub.GetPod(scheduler_pb2.GetPodRequest(namespace=ns, name=name), timeout=args.timeout)
    if args.output != "table":
        print(cliformat.dump(p, args.output))
        return EXIT_OK
    state = cliformat.state_name(p.state)
    fields = [
        ("pod", f"{p.pod.namespace}/{p.pod.name}"),
        ("state", cliformat.colour(state, cliformat.state_colour(state))),
        ("node", p.node or "-"),
        ("nominated node", p.nominated_node or "-"),
        ("scheduler", p.scheduler_name),
        ("priority", str(p.priority)),
        ("queue", p.queue or "-"),
        ("scheduling attempts", str(p.scheduling_attempts)),
        ("bind attempts", str(p.bind_attempts)),
        ("group", p.group or "-"),
        ("last attempt", cliformat.when(p.last_attempt) if p.HasField("last_attempt") else "-"),
        ("message", p.message or "-"),
    ]
    for key, value in fields:
        print(f"{key + ':':<21}{value}")
    if p.last_failures:
        print()
        print(
            cliformat.table(
                ("NODE", "PLUGIN", "WHY NOT (LAST ATTEMPT)"),
                [(f.node, f.plugin or "-", "; ".join(f.reasons)) for f in p.last_failures],
            )
        )
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    ns, name = _split_pod(args.pod)
    channel, stub = _stub(args)
    with channel:
        resp = stub.Explain(
            scheduler_pb2.ExplainRequest(namespace=ns, name=name, include_nodes=args.nodes),
            timeout=args.timeout,
        )
    pending = resp.state == scheduler_pb2.WAITING
    if args.output != "table":
        print(cliformat.dump(resp, args.output))
        return EXIT_OK if pending else EXIT_NEGATIVE
    state = cliformat.state_name(resp.state)
    print(f"pod {ns}/{name}: {cliformat.colour(state, cliformat.state_colour(state))}")
    print(f"  {resp.summary}")
    if resp.pod_error:
        print(f"  the pod itself is invalid: {resp.pod_error}")
    if pending:
        print(f"  feasible nodes: {resp.feasible_nodes}/{resp.total_nodes}")
    if resp.plugins:
        print(cliformat.verdict_table(resp.plugins))
    if pending:
        help_text = "yes" if resp.preemption_might_help else "no"
        print(f"  preemption might help: {help_text}")
    if resp.blocking_group_member:
        print(f"  gang blocked by: {resp.blocking_group_member}")
    if resp.nodes:
        rows = [
            (
                n.node,
                "yes" if n.feasible else "no",
                "; ".join(f"{r.plugin}: {', '.join(r.reasons)}" for r in n.rejections) or "-",
            )
            for n in resp.nodes
        ]
        print(
            cliformat.table(
                ("NODE", "FITS", "REJECTED BY"),
                rows,
                colours={"FITS": lambda c: cliformat.GREEN if c == "yes" else cliformat.RED},
            )
        )
    return EXIT_OK if pending else EXIT_NEGATIVE


def cmd_simulate(args: argparse.Namespace) -> int:
    """What-if against the live scheduler: where would these pods go?"""
    manifests = []
    for path in args.file:
        try:
            manifests.append(sys.stdin.read() if path == "-" else Path(path).read_text())
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise UsageError(f"cannot read {path}: {why}") from None
    channel, stub = _stub(args)
    with channel:
        resp = stub.Simulate(
            scheduler_pb2.SimulateRequest(manifests=manifests, gang=args.gang, top_nodes=args.top),
            timeout=args.timeout,
        )
    if args.output != "table":
        print(cliformat.dump(resp, args.output))
        return EXIT_OK if resp.all_placed else EXIT_NEGATIVE
    rows = []
    for p in resp.placements:
        top = ", ".join(f"{n.node}={n.total:.0f}" for n in p.top_nodes)
        rows.append((f"{p.pod.namespace}/{p.pod.name}", p.node or "-", top or "-", p.summary))
    print(
        cliformat.table(
            ("POD", "NODE", "TOP NODES (SCORE)", "SUMMARY"),
            rows,
            colours={"NODE": lambda c: cliformat.RED if c == "-" else cliformat.GREEN},
        )
    )
    for p in resp.placements:
        if p.plugins:
            print(f"\nwhy {p.pod.namespace}/{p.pod.name} fits nowhere:")
            print(cliformat.verdict_table(p.plugins))
    if resp.HasField("blocking_pod"):
        print(f"\ngang blocked by {resp.blocking_pod.namespace}/{resp.blocking_pod.name}")
    return EXIT_OK if resp.all_placed else EXIT_NEGATIVE


def cmd_nodes(args: argparse.Namespace) -> int:
    request = scheduler_pb2.ListNodesRequest(
        name_prefix=args.prefix or "", include_pods=args.output != "table" and args.pods
    )
    channel, stub = _stub(args)
    with channel:
        nodes = list(
            _all_pages(
                lambda r: stub.ListNodes(r, timeout=args.timeout), request, lambda r: r.nodes
            )
        )
    if args.output != "table":
        print(cliformat.dump(scheduler_pb2.ListNodesResponse(nodes=nodes), args.output))
        return EXIT_OK
    rows = []
    for n in nodes:

        def used(res: str, node: scheduler_pb2.NodeView = n) -> str:
            alloc = node.allocatable.get(res, 0)
            req = node.requested.get(res, 0)
            pct = f"{100 * req // alloc}%" if alloc else "-"
            return f"{cliformat.fmt_amount(res, req)}/{cliformat.fmt_amount(res, alloc)} ({pct})"

        other = ", ".join(
            f"{res} {used(res)}"
            for res in sorted(n.allocatable)
            if res not in ("cpu", "memory", "pods", "ephemeral-storage")
        )
        taints = ",".join(f"{t.key}={t.value}:{t.effect}" for t in n.taints) or "-"
        pods = f"{n.pod_count}/{n.allocatable.get('pods', 0)}"
        flags = "cordoned" if n.unschedulable else ""
        rows.append((n.name, pods, used("cpu"), used("memory"), other or "-", taints, flags))
    print(
        cliformat.table(
            ("NODE", "PODS", "CPU", "MEMORY", "OTHER", "TAINTS", ""),
            rows,
            colours={"": lambda c: cliformat.RED if c else ""},
        )
    )
    return EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    request = scheduler_pb2.WatchDecisionsRequest(
        namespace=args.namespace or "", include_outcomes=True, replay=args.recent
    )
    channel, stub = _stub(args)
    seen = 0
    with channel:
        stream = stub.WatchDecisions(request)
        try:
            for d in stream:
                if args.output == "json":
                    print(cliformat.json_line(d), flush=True)
                elif args.output == "yaml":
                    print("---\n" + cliformat.dump(d, "yaml"), flush=True)
                else:
                    kind = cliformat.kind_name(d.kind)
                    shown = cliformat.colour(f"{kind:<13}", cliformat.kind_colour(kind))
                    line = (
                        f"{cliformat.when(d.at)}  {shown}  "
                        f"{d.pod.namespace}/{d.pod.name}  {d.node or '-'}  {d.message[:120]}"
                    )
                    print(line.rstrip(), flush=True)
                seen += 1
                if args.count and seen >= args.count:
                    break
        except KeyboardInterrupt:
            pass
        finally:
            stream.cancel()
    return EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    ns, name = _split_pod(args.pod)
    if args.last < 0:
        raise UsageError(f"--last must be 0 or more, got {args.last}")
    channel, stub = _stub(args)
    request = scheduler_pb2.GetPodTraceRequest(namespace=ns, name=name, attempts=args.last)
    with channel:
        resp = stub.GetPodTrace(request, timeout=args.timeout)
    if args.output != "table":
        print(cliformat.dump(resp, args.output))
        return EXIT_OK
    print(f"pod {ns}/{name}: last {len(resp.attempts)} attempt(s), oldest first")
    for attempt in resp.attempts:
        print()
        print(cliformat.trace_tree(attempt))
    return EXIT_OK


# ---- wiring ---------------------------------------------------------------------------------


def add_client_options(p: argparse.ArgumentParser) -> None:
    env = os.environ.get
    p.add_argument(
        "--server",
        default=env("SPLITSCHED_SERVER", DEFAULT_SERVER),
        help=f"scheduler gRPC address (env SPLITSCHED_SERVER; default {DEFAULT_SERVER})",
    )
    p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    tls = p.add_argument_group("TLS (the default is plaintext)")
    tls.add_argument("--tls", action="store_true", help="TLS with the system's root CAs")
    tls.add_argument(
        "--ca", default=env("SPLITSCHED_CA"), help="CA bundle (PEM) to verify the server"
    )
    tls.add_argument(
        "--cert", default=env("SPLITSCHED_CERT"), help="client certificate (PEM), mutual TLS"
    )
    tls.add_argument("--key", default=env("SPLITSCHED_KEY"), help="client private key (PEM)")
    tls.add_argument(
        "--server-name",
        default=env("SPLITSCHED_TLS_SERVER_NAME"),
        help="expect this name in the server's certificate (when --server is an IP)",
    )


def register(sub: Any) -> None:
    pods = sub.add_parser(
        "pods", help="pods the scheduler tracks, with their state (or one pod in detail)"
    )
    pods.add_argument("pod", nargs="?", help="NAMESPACE/NAME: show this pod in detail")
    pods.add_argument("--pending", action="store_true", help="only pods still waiting")
    pods.add_argument(
        "--state",
        choices=("gated", "waiting", "preempting", "binding", "bound"),
        help="only this state",
    )
    pods.add_argument("-n", "--namespace", help="only this namespace")
    add_client_options(pods)
    pods.set_defaults(func=cmd_pods)

    explain = sub.add_parser("explain", help="why is a pod pending: per plugin and node class")
    explain.add_argument("pod", help="NAMESPACE/NAME (or NAME in default)")
    explain.add_argument("--nodes", action="store_true", help="every node's verdict too")
    add_client_options(explain)
    explain.set_defaults(func=cmd_explain)

    nodes = sub.add_parser("nodes", help="allocatable, requested and free per node")
    nodes.add_argument("--prefix", help="only nodes whose name starts with this")
    nodes.add_argument("--pods", action="store_true", help="with -o json|yaml: list the pods")
    add_client_options(nodes)
    nodes.set_defaults(func=cmd_nodes)

    watch_p = sub.add_parser("watch", help="follow decisions and binding outcomes live")
    watch_p.add_argument("-n", "--namespace", help="only this namespace")
    watch_p.add_argument(
        "--recent", type=int, default=0, metavar="N", help="start with the last N decisions"
    )
    watch_p.add_argument("--count", type=int, default=0, metavar="N", help="stop after N decisions")
    add_client_options(watch_p)
    watch_p.set_defaults(func=cmd_watch)

    trace_p = sub.add_parser(
        "trace", help="a pod's last attempts as span trees, from the scheduler's memory"
    )
    trace_p.add_argument("pod", help="NAMESPACE/NAME (or NAME in default)")
    trace_p.add_argument(
        "--last", type=int, default=0, metavar="N", help="only the last N attempts (0: all)"
    )
    add_client_options(trace_p)
    trace_p.set_defaults(func=cmd_trace)


# `simulate` is registered by splitsched.cli (it also has an offline mode); its server half
# is ours.
_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"simulate": cmd_simulate}


def run(args: argparse.Namespace) -> int:
    func: Callable[[argparse.Namespace], int] = _COMMANDS.get(args.command, args.func)
    try:
        return func(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except grpc.RpcError as exc:
        return _rpc_error(exc, getattr(args, "server", ""))
