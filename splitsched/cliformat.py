"""How the `splitsched` CLI shows the Scheduler API's answers: aligned tables (coloured
when stdout is a terminal and NO_COLOR is unset), JSON/YAML documents of the messages,
resource amounts as people write them, and the names and colours of pod states and
decision kinds. Pure text: no channel, no flags (``splitsched.apiclient`` calls it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC
from typing import Any

import yaml
from google.protobuf import json_format
from google.protobuf.message import Message

from splitsched.v1 import scheduler_pb2

GREEN, CYAN, YELLOW, MAGENTA, RED, BLUE, BOLD = "32", "36", "33", "35", "31", "34", "1"
_STATE_NAMES: dict[int, str] = {int(v): k for k, v in scheduler_pb2.PodState.items()}
_KIND_NAMES: dict[int, str] = {int(v): k for k, v in scheduler_pb2.Decision.Kind.items()}
_STATE_COLOUR = {
    "BOUND": GREEN,
    "BINDING": CYAN,
    "WAITING": YELLOW,
    "PREEMPTING": MAGENTA,
    "GATED": BLUE,
}
_KIND_COLOUR = {
    "SCHEDULED": CYAN,
    "BOUND": GREEN,
    "UNSCHEDULABLE": YELLOW,
    "PREEMPTING": MAGENTA,
    "BIND_FAILED": RED,
    "CONFLICT": RED,
    "POD_GONE": RED,
}


def colour_enabled() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def colour(text: str, code: str) -> str:
    return f"\033[{code}m{text}\033[0m" if code and colour_enabled() else text


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    colours: dict[str, Callable[[str], str]] | None = None,
) -> str:
    """Aligned columns; `colours` maps a header to the colour code of each of its cells
    (padding is measured before colouring, so columns stay aligned)."""
    rows = [list(r) for r in rows]
    widths = [len(h) for h in headers]
    for r in rows:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], len(cell))
    lines = [colour("  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip(), BOLD)]
    pick = colours or {}
    for r in rows:
        cells = []
        for i, cell in enumerate(r):
            padded = cell.ljust(widths[i]) if i < len(r) - 1 else cell
            code = pick[headers[i]](cell) if headers[i] in pick else ""
            cells.append(colour(padded, code) if code else padded)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def doc(message: Message) -> dict[str, Any]:
    """A message as a plain document, zero values included (feasible_nodes: 0,
    all_placed: false): scripts should not have to know proto3's defaults."""
    out: dict[str, Any] = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return out


def dump(message: Message, fmt: str) -> str:
    """``-o json`` (indented) or ``-o yaml``."""
    if fmt == "yaml":
        return str(yaml.safe_dump(doc(message), sort_keys=False)).rstrip("\n")
    return json.dumps(doc(message), indent=2)


def json_line(message: Message) -> str:
    """One compact JSON object per line (``watch -o json``)."""
    return json.dumps(doc(message), separators=(",", ":"))


def fmt_amount(resource: str, amount: int) -> str:
    """CPU in cores or millicores, memory-like resources in Gi/Mi/Ki, the rest as is."""
    if resource == "cpu":
        return f"{amount}m" if amount % 1000 else str(amount // 1000)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for unit, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if amount >= size:
                value = amount / size
                return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return str(amount)


def state_name(value: int) -> str:
    return _STATE_NAMES.get(value, "?")


def state_colour(cell: str) -> str:
    return _STATE_COLOUR.get(cell, "")


def kind_name(value: int) -> str:
    return _KIND_NAMES.get(value, "?")


def kind_colour(kind: str) -> str:
    return _KIND_COLOUR.get(kind, "")


def when(ts: Any) -> str:
    """A protobuf Timestamp as local wall-clock time to the millisecond."""
    return str(ts.ToDatetime(tzinfo=UTC).astimezone().strftime("%H:%M:%S.%f")[:-3])


def verdict_table(verdicts: Iterable[scheduler_pb2.PluginVerdict]) -> str:
    """Per filter plugin: how many nodes it rejected, whether preemption could help, its
    reasons and the first three node classes it rejected."""
    rows = []
    for v in verdicts:
        reasons = "; ".join(f"{r.nodes} {r.reason}" for r in v.reasons)
        classes = ", ".join(f"{c.node_class} ({c.nodes})" for c in v.node_classes[:3])
        if len(v.node_classes) > 3:
            classes += f", +{len(v.node_classes) - 3} more"
        preempt = "yes" if v.resolvable_by_preemption else "no"
        rows.append((v.plugin, str(v.rejected_nodes), preempt, reasons, classes))
    return table(("PLUGIN", "REJECTED", "PREEMPTABLE", "REASONS", "NODE CLASSES"), rows)


# ---- a pod's attempts as span trees (`splitsched trace`) ------------------------------------
#: The span attributes `trace` shows, with their short names.
TRACE_ATTRIBUTES = (
    ("splitsched.attempt", "attempt"),
    ("k8s.node.name", "node"),
    ("splitsched.feasible_nodes", "feasible"),
    ("splitsched.nodes", "nodes"),
    ("splitsched.score", "score"),
    ("splitsched.gang.result", "gang"),
    ("splitsched.confirmed_by", "by"),
    ("splitsched.binder.id", "binder"),
)


def _tree_order(spans: Sequence[scheduler_pb2.TraceSpan]) -> list[tuple[int, Any]]:
    """(depth, span) depth first, children by start time; a span whose parent is not in
    the attempt (the root's is the watcher's) is at depth 0."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[Any]] = {}
    for s in spans:
        children.setdefault(s.parent_span_id if s.parent_span_id in ids else "", []).append(s)
    out: list[tuple[int, Any]] = []

    def walk(parent: str, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda s: s.start.ToNanoseconds()):
            out.append((depth, s))
            walk(s.span_id, depth + 1)

    walk("", 0)
    return out


def trace_tree(attempt: scheduler_pb2.TraceAttempt) -> str:
    """One attempt: a header line, then its spans as an indented tree with their start
    (ms after the root's) and duration, ERROR and its message, and a few attributes."""
    ordered = _tree_order(attempt.spans)
    if not ordered:
        return f"trace {attempt.trace_id}: no spans"
    origin = ordered[0][1].start.ToNanoseconds()
    rows = []
    for depth, s in ordered:
        attrs = [f"{short}={s.attributes[key]}" for key, short in TRACE_ATTRIBUTES
                 if key in s.attributes]  # fmt: skip
        status = f"ERROR {s.status_message}".strip() if s.error else ""
        rows.append(
            (
                "  " * depth + s.name,
                f"{(s.start.ToNanoseconds() - origin) / 1e6:.2f}",
                f"{s.duration_ns / 1e6:.2f}",
                " ".join(filter(None, [" ".join(attrs), status])) or "-",
            )
        )
    root = ordered[0][1]
    exported = attempt.exported or "no"
    header = (
        f"trace {attempt.trace_id}  started {when(root.start)}  "
        f"{root.duration_ns / 1e6:.2f} ms  exported: {exported}"
    )
    body = table(
        ("SPAN", "START MS", "DUR MS", "DETAILS"),
        rows,
        colours={"DETAILS": lambda c: RED if "ERROR" in c else ""},
    )
    return f"{header}\n{body}"
