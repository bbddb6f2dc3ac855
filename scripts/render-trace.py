#!/usr/bin/env python3
"""Render one pod's trace as a timeline, from the spans the e2e tracing test received.

    SPLITSCHED_TRACE_DUMP=/tmp/spans.json .venv/bin/pytest tests/e2e/test_tracing.py
    .venv/bin/python scripts/render-trace.py /tmp/spans.json --pod flaky [--png trace.png]

Input: the JSON list `splitsched/testing/otlp.py` dumps (one object per span: service, name,
trace_id, span_id, parent_span_id, kind, start_ns, end_ns, status, attributes, ...).
Output: an ASCII timeline on stdout (the span tree, offsets and durations from the trace's
first span, a bar per span, the attributes that matter), and with `--png` a Gantt chart
drawn by matplotlib. Used to make the picture in docs/observability.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SHOWN = (
    "k8s.node.name",
    "splitsched.attempt",
    "splitsched.feasible_nodes",
    "http.response.status_code",
    "splitsched.retry_delay_seconds",
    "splitsched.confirmed_by",
)
SHORT = {
    "k8s.node.name": "node",
    "splitsched.attempt": "attempt",
    "splitsched.feasible_nodes": "feasible",
    "http.response.status_code": "status",
    "splitsched.retry_delay_seconds": "retry_in",
    "splitsched.confirmed_by": "by",
}


def pick_trace(spans: list[dict[str, Any]], pod: str | None) -> list[dict[str, Any]]:
    """The spans of the trace of `pod`'s (last) confirmed attempt; without `pod`, the trace
    with the most spans."""
    roots = [
        s
        for s in spans
        if s["name"] == "schedule_pod"
        and (pod is None or s["attributes"].get("k8s.pod.name") == pod)
    ]
    if not roots:
        raise SystemExit(f"no schedule_pod span{' for pod ' + pod if pod else ''}")

    def size(root: dict[str, Any]) -> tuple[int, int]:
        return (sum(1 for s in spans if s["trace_id"] == root["trace_id"]), root["start_ns"])

    trace_id = max(roots, key=size)["trace_id"]
    return [s for s in spans if s["trace_id"] == trace_id]


def tree_order(trace: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(depth, span) in depth-first order, siblings by start time."""
    ids = {s["span_id"] for s in trace}
    kids: dict[str, list[dict[str, Any]]] = {}
    for s in trace:
        parent = s["parent_span_id"] if s["parent_span_id"] in ids else ""
        kids.setdefault(parent, []).append(s)
    out: list[tuple[int, dict[str, Any]]] = []

    def walk(parent: str, depth: int) -> None:
        for s in sorted(kids.get(parent, []), key=lambda x: (x["start_ns"], x["end_ns"])):
            out.append((depth, s))
            walk(s["span_id"], depth + 1)

    walk("", 0)
    return out


def short_name(name: str) -> str:
    """`POST /api/v1/namespaces/{namespace}/pods/{name}/binding` -> `POST .../binding`."""
    method, _, path = name.partition(" ")
    if path.startswith("/") and path.count("/") > 2:
        return f"{method} .../{path.rsplit('/', 1)[-1]}"
    return name


def fmt_ms(ns: float) -> str:
    ms = ns / 1e6
    return f"{ms:8.1f}" if ms >= 10 else f"{ms:8.2f}"


def render_ascii(trace: list[dict[str, Any]], *, width: int = 48) -> str:
    rows = tree_order(trace)
    t0 = min(s["start_ns"] for s in trace)
    t1 = max(s["end_ns"] for s in trace)
    total = max(1, t1 - t0)
    root = next(s for _, s in rows if s["name"] == "schedule_pod")
    pod = f"{root['attributes'].get('k8s.namespace.name')}/{root['attributes'].get('k8s.pod.name')}"
    lines = [
        f"trace {root['trace_id']}  pod {pod}  {total / 1e6:.1f} ms from first to last span",
        f"{'service':<10} {'span':<28} {'start ms':>8} {'dur ms':>8}  {'timeline':<{width}}  "
        "attributes",
    ]
    for depth, s in rows:
        start = (s["start_ns"] - t0) / total * width
        end = (s["end_ns"] - t0) / total * width
        a = int(start)
        b = max(a + 1, round(end))
        bar = " " * a + ("=" * (b - a) if s["end_ns"] > s["start_ns"] else "|")
        name = "  " * depth + short_name(s["name"])
        root_node = root["attributes"].get("k8s.node.name")
        attrs = [
            f"{SHORT[k]}={v}"
            for k in SHOWN
            if (v := s.get("attributes", {}).get(k)) is not None
            and not (k == "k8s.node.name" and s is not root and v == root_node)
        ]
        if s.get("status") == "ERROR":
            attrs.append(f"ERROR({s.get('status_message') or s['attributes'].get('error.type')})")
        service = s["service"].removeprefix("splitsched-")
        lines.append(
            f"{service:<10} {name:<28} {fmt_ms(s['start_ns'] - t0)} "
            f"{fmt_ms(s['end_ns'] - s['start_ns'])}  {bar:<{width}}  {' '.join(attrs)}".rstrip()
        )
    return "\n".join(lines)


def render_png(trace: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    rows = tree_order(trace)
    t0 = min(s["start_ns"] for s in trace)
    colors = {"splitsched-watcher": "#4c72b0", "splitsched-scheduler": "#55a868",
              "splitsched-binder": "#c44e52"}  # fmt: skip
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(rows) + 1))
    for i, (depth, s) in enumerate(rows):
        start = (s["start_ns"] - t0) / 1e6
        dur = max((s["end_ns"] - s["start_ns"]) / 1e6, 0.05)
        edge = "black" if s.get("status") == "ERROR" else "none"
        ax.broken_barh([(start, dur)], (i - 0.4, 0.8), color=colors.get(s["service"], "gray"),
                       edgecolor=edge, linewidth=1.5)  # fmt: skip
        label = short_name(s["name"]) + " ·" * depth  # right-aligned: depth as dots
        code = s["attributes"].get("http.response.status_code")
        if code:
            label += f" ({code})"
        ax.text(-0.01, i, label, ha="right", va="center", fontsize=8,
                transform=ax.get_yaxis_transform())  # fmt: skip
    ax.set_yticks([])
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds since the watch event")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    ax.legend(handles, [k.removeprefix("splitsched-") for k in colors], loc="upper center",
              bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)  # fmt: skip
    fig.subplots_adjust(left=0.3, bottom=0.2)
    fig.savefig(path, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spans", type=Path, help="JSON dump of received spans")
    parser.add_argument("--pod", help="pod name (default: the trace with the most spans)")
    parser.add_argument("--png", type=Path, help="also draw the timeline to this PNG")
    parser.add_argument("--width", type=int, default=48, help="timeline columns")
    args = parser.parse_args(argv)
    spans = json.loads(args.spans.read_text())
    trace = pick_trace(spans, args.pod)
    print(render_ascii(trace, width=args.width))
    if args.png:
        render_png(trace, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
