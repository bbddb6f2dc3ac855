"""How the CLI shows answers (``splitsched.cliformat``): aligned tables, colour only on a
terminal, amounts as people write them, documents with proto3's zero values."""

from __future__ import annotations

import json

import pytest

from splitsched import cliformat
from splitsched.v1 import scheduler_pb2


def test_table_aligns_columns_and_trims_trailing_space(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cliformat, "colour_enabled", lambda: False)
    out = cliformat.table(("POD", "STATE", "NODE"), [("a/p", "BOUND", "n1"), ("b/long", "", "")])
    assert out.splitlines() == ["POD     STATE  NODE", "a/p     BOUND  n1", "b/long"]


def test_colour_only_where_asked_and_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cliformat, "colour_enabled", lambda: True)
    out = cliformat.table(("S", "N"), [("BOUND", "x")], colours={"S": cliformat.state_colour})
    header, row = out.splitlines()
    assert header == "\033[1mS      N\033[0m"
    assert row == "\033[32mBOUND\033[0m  x"  # padded before colouring
    last = cliformat.table(("S", "NODE"), [("a", "n")], colours={"NODE": lambda c: cliformat.RED})
    assert last.splitlines()[1] == "a  \033[31mn\033[0m"  # the last cell is not padded
    monkeypatch.setattr(cliformat, "colour_enabled", lambda: False)
    assert cliformat.colour("x", cliformat.RED) == "x"


def test_no_colour_when_not_a_terminal_or_no_color_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not cliformat.colour_enabled()
    monkeypatch.delenv("NO_COLOR")
    assert cliformat.colour_enabled()
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    assert not cliformat.colour_enabled()


@pytest.mark.parametrize(
    ("resource", "amount", "shown"),
    [
        ("cpu", 1500, "1500m"),
        ("cpu", 2000, "2"),
        ("memory", 64 << 20, "64Mi"),
        ("memory", 3 << 29, "1.5Gi"),
        ("memory", 512, "512"),
        ("hugepages-2Mi", 4 << 20, "4Mi"),
        ("ephemeral-storage", 1 << 10, "1Ki"),
        ("nvidia.com/gpu", 3, "3"),
    ],
)
def test_amounts(resource: str, amount: int, shown: str) -> None:
    assert cliformat.fmt_amount(resource, amount) == shown


def test_names_of_states_and_kinds_unknown_values_are_a_question_mark() -> None:
    assert cliformat.state_name(scheduler_pb2.WAITING) == "WAITING"
    assert cliformat.state_name(999) == "?"
    assert cliformat.kind_name(scheduler_pb2.Decision.BOUND) == "BOUND"
    assert cliformat.kind_name(999) == "?"
    assert cliformat.kind_colour("CONFLICT") == cliformat.RED
    assert cliformat.state_colour("nothing") == ""


def test_documents_keep_zero_values_and_field_names() -> None:
    resp = scheduler_pb2.ExplainResponse(feasible_nodes=0, summary="s")
    assert json.loads(cliformat.dump(resp, "json"))["feasible_nodes"] == 0
    assert "preemption_might_help: false" in cliformat.dump(resp, "yaml")
    line = cliformat.json_line(resp)
    assert "\n" not in line and json.loads(line)["summary"] == "s"


def test_verdict_table_shows_three_node_classes_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cliformat, "colour_enabled", lambda: False)
    verdict = scheduler_pb2.PluginVerdict(
        plugin="NodeResourcesFit",
        rejected_nodes=5,
        resolvable_by_preemption=True,
        reasons=[scheduler_pb2.ReasonCount(reason="Insufficient cpu", nodes=5)],
        node_classes=[scheduler_pb2.NodeClassCount(node_class=f"c{i}", nodes=1) for i in range(5)],
    )
    _, row = cliformat.verdict_table([verdict]).splitlines()
    assert row.split()[:3] == ["NodeResourcesFit", "5", "yes"]
    assert row.endswith("5 Insufficient cpu  c0 (1), c1 (1), c2 (1), +2 more")


def trace_span(
    name: str, span_id: str, parent: str, start_ms: float, dur_ms: float, **attrs: str
) -> scheduler_pb2.TraceSpan:
    span = scheduler_pb2.TraceSpan(
        name=name, span_id=span_id, parent_span_id=parent, duration_ns=int(dur_ms * 1e6)
    )
    span.start.FromNanoseconds(1_700_000_000_000_000_000 + int(start_ms * 1e6))
    span.attributes.update(attrs)
    return span


def test_trace_tree_indents_children_under_their_parent_in_start_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cliformat, "colour_enabled", lambda: False)
    root = trace_span("schedule_pod", "r", "watch", 0, 12.5, **{"splitsched.attempt": "2"})
    root.error, root.status_message = True, "0/3 nodes are available: 3 Insufficient cpu."
    filt = trace_span("filter", "f", "r", 1.25, 0.5, **{"splitsched.feasible_nodes": "0"})
    attempt = scheduler_pb2.TraceAttempt(trace_id="ab" * 16, exported="failed")
    # Given out of order: the tree follows parents and start times, not the list.
    attempt.spans.extend([filt, trace_span("queue_wait", "q", "r", 0, 1.25), root])
    lines = cliformat.trace_tree(attempt).splitlines()
    assert lines[0].startswith(f"trace {'ab' * 16}  started ")
    assert lines[0].endswith("12.50 ms  exported: failed")
    assert [line.split()[0] for line in lines[1:]] == [
        "SPAN",
        "schedule_pod",
        "queue_wait",
        "filter",
    ]
    assert lines[2].startswith("schedule_pod ") and lines[3].startswith("  queue_wait ")
    assert lines[2].split()[1:4] == ["0.00", "12.50", "attempt=2"]
    assert lines[2].endswith("ERROR 0/3 nodes are available: 3 Insufficient cpu.")
    assert lines[4].split()[1:] == ["1.25", "0.50", "feasible=0"]
    assert lines[3].split()[1:] == ["0.00", "1.25", "-"]


def test_trace_tree_of_an_attempt_without_spans() -> None:
    attempt = scheduler_pb2.TraceAttempt(trace_id="cd" * 16)
    assert cliformat.trace_tree(attempt) == f"trace {'cd' * 16}: no spans"
