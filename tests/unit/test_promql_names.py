"""The metric-name tokenizer the dashboard/alerts test relies on (tests/support/promql.py);
that every query of the chart's dashboard and alerts is valid PromQL (promql-parser, the
Rust parser's Python binding); and that the tokenizer finds in each exactly the metrics the
parser does (a query it found nothing in would be checked against nothing by
tests/e2e/test_metrics_health.py)."""

from __future__ import annotations

import promql_parser

from tests.support import promql
from tests.support.helm import CHART

DASHBOARD = CHART / "files" / "grafana-dashboard.json"
RULES = CHART / "files" / "prometheus-rules.yaml"


def test_names_are_prefixed_identifiers_outside_strings() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le) (rate(splitsched_binder_bind_duration_seconds_bucket"
        "{namespace=~\"scheduler_x|splitsched_y\", result!='scheduler_z'}[5m])))"
        " / on (pod) group_left scheduler_pending_pods offset 5m"
        " and label_values(splitsched_scheduler_leader, namespace)"
    )
    assert promql.metric_names(expr) == {
        "splitsched_binder_bind_duration_seconds_bucket",
        "scheduler_pending_pods",
        "splitsched_scheduler_leader",
    }
    assert promql.metric_names('up{job="splitsched_watcher"} > 0') == set()


def test_served_names_follow_the_family_type() -> None:
    served = promql.served_names(
        [("a", "counter"), ("g", "gauge"), ("h", "histogram"), ("x", "unknown")]
    )
    assert served == {"a_total", "g", "h_bucket", "h_sum", "h_count", "x"}


def test_every_dashboard_and_alert_query_names_a_metric() -> None:
    exprs = promql.dashboard_exprs(DASHBOARD)
    rules = promql.rule_exprs(RULES)
    assert len(exprs) >= 6 and len(rules) >= 4
    for expr in [*exprs, *rules.values()]:
        assert promql.metric_names(expr), expr
    assert {"SplitschedNoLeader", "SplitschedPendingPodsGrowing", "SplitschedBinderErrorRatio",
            "SplitschedWatcherStreamLag"} <= set(rules)  # fmt: skip


def parsed_metric_names(expr: str) -> set[str]:
    """The vector selectors' metric names, as the PromQL parser finds them."""
    names: set[str] = set()

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def test_every_query_is_promql_naming_what_the_tokenizer_finds() -> None:
    queries = [promql.as_promql(e) for e in promql.dashboard_exprs(DASHBOARD, variables=False)]
    queries += promql.rule_exprs(RULES).values()
    for expr in queries:
        assert parsed_metric_names(expr) == promql.metric_names(expr), expr
    try:
        promql_parser.parse("sum by (le (rate(x[5m]))")
    except ValueError as exc:
        assert "parenthesis" in str(exc)
    else:
        raise AssertionError("the parser accepted an unclosed parenthesis")
