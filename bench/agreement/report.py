"""The agreement's tables (one per seed, and the summary) and its JSON. Pure."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from bench.agreement import compare, known

_WIDTH = 100


def _where(outcome: compare.PodOutcome) -> str:
    if outcome.timed_out:
        return "no outcome (timed out)"
    count = "?" if outcome.feasible is None else str(len(outcome.feasible))
    where = outcome.node if outcome.node is not None else "pending"
    gated = {None: "", True: ", gated", False: ", gate NOT kept"}[outcome.gate_kept]
    return f"{where} [{count} feasible{gated}]"


def kube_bugs(t: compare.Tally) -> int:
    """Pods that disagree only by kube-scheduler's own documented bugs."""
    return sum(n for known_id, n in t.known.items() if known.kube_bug(known_id))


def agreed_or_kube_bug(t: compare.Tally) -> tuple[int, float]:
    """Pods that agree, or differ only by a documented kube-scheduler bug, and their %:
    the agreement splitsched can reach without copying kube's bugs."""
    n = t.agreed + kube_bugs(t)
    return n, 100.0 * n / t.pods if t.pods else 100.0


def seed_line(result: compare.SeedResult) -> str:
    if result.error:
        return f"seed {result.seed}: ERROR {result.error} ({result.seconds:.0f}s)"
    t = result.tally
    ours = sum(t.known.values()) - kube_bugs(t)
    extra = f", {kube_bugs(t)} by kube-scheduler's known bug(s)" if kube_bugs(t) else ""
    extra += f", {ours} by our known difference(s)" if ours else ""
    return (
        f"seed {result.seed}: {t.agreed}/{t.pods} pods agree ({t.percent:.1f}%){extra}, "
        f"{result.nodes} nodes, {result.seconds:.0f}s"
    )


def seed_table(result: compare.SeedResult, *, all_pods: bool = False) -> str:
    """One line per pod (only disagreements unless ``all_pods``), then each disagreement's
    feasible sets and messages side by side."""
    lines = [seed_line(result)]
    if result.cluster_differs:
        lines.append(f"  the runs' nodes differ: {result.cluster_differs}")
    lines.append(f"  {'pod':5} {'kube-scheduler':28} {'splitsched':28} verdict")
    for v in result.verdicts:
        if v.agrees and not all_pods:
            continue
        verdict = "ok" if v.agrees else "DIFFERS: " + ",".join(v.failed)
        if v.known:
            verdict += f" (known: {v.known})"
        lines.append(f"  {v.pod:5} {_where(v.kube):28} {_where(v.ours):28} {verdict}")
    for v in result.verdicts:
        if not v.agrees:
            lines += _detail(v)
    return "\n".join(lines)


def _detail(v: compare.Verdict) -> list[str]:
    out = [f"  {v.pod}:"]
    k, o = v.kube.feasible, v.ours.feasible
    if v.checks.get("feasible") is False and k is not None and o is not None:
        out.append(f"    feasible only for kube-scheduler: {sorted(k - o)}")
        out.append(f"    feasible only for splitsched:     {sorted(o - k)}")
    for who, outcome in (("kube-scheduler", v.kube), ("splitsched", v.ours)):
        if outcome.message is not None:
            out.append(f"    {who}: {outcome.message}")
    return out


def summary(results: Sequence[compare.SeedResult]) -> str:
    """The agreement over every seed: pods, agreement %, failed checks, known differences."""
    verdicts = [v for r in results for v in r.verdicts]
    t = compare.tally(verdicts)
    clean = [r.seed for r in results if not r.error and r.tally.agreed == r.tally.pods]
    honest, percent = agreed_or_kube_bug(t)
    lines = [
        "=" * _WIDTH,
        f"agreement: {t.agreed}/{t.pods} pods ({t.percent:.1f}%) over {len(results)} seed(s); "
        f"{len(clean)} seed(s) at 100%",
        f"agree, or differ only by a documented kube-scheduler bug: {honest}/{t.pods} pods "
        f"({percent:.1f}%); splitsched differs on {t.pods - honest}",
        "failed checks: " + ", ".join(f"{k} {n}" for k, n in t.failed.items()),
        _same_node(verdicts),
    ]
    lines += _known_lines(results)
    if t.unexplained:
        seeds = sorted(
            {r.seed for r in results for v in r.verdicts if not v.agrees and not v.known}
        )
        lines.append(f"UNEXPLAINED: {t.unexplained} pod(s), seeds {seeds}")
    for r in results:
        if r.error:
            lines.append(f"seed {r.seed} did not complete: {r.error}")
    return "\n".join(lines)


def _known_lines(results: Sequence[compare.SeedResult]) -> list[str]:
    """Each known difference once: the pods that show it (a pod may show several), its
    seeds, what it is."""
    pods: dict[str, int] = {}
    seeds: dict[str, set[int]] = {}
    for r in results:
        for v in r.verdicts:
            for part in (v.known or "").split("+") if v.known else ():
                pods[part] = pods.get(part, 0) + 1
                seeds.setdefault(part, set()).add(r.seed)
    out = []
    for difference_id in sorted(pods):
        listed = sorted(seeds[difference_id])
        shown = ", ".join(map(str, listed[:20])) + (", ..." if len(listed) > 20 else "")
        out.append(
            f"known difference {difference_id}: {pods[difference_id]} pod(s) in "
            f"{len(listed)} seed(s) [{shown}]"
        )
        out += [f"  {line.partition(': ')[2]}" for line in known.describe(difference_id)]
    return out


def _same_node(verdicts: Sequence[compare.Verdict]) -> str:
    """Not a check: where both bound, how often on the very same node (the rest are score
    ties broken differently, or different scores; the run was realigned after each)."""
    both = [v for v in verdicts if v.kube.node is not None and v.ours.node is not None]
    same = sum(v.kube.node == v.ours.node for v in both)
    gated = sum(v.checks.get("gated") is not None for v in verdicts)
    return (
        f"same node as kube-scheduler (not a check): {same}/{len(both)} pods bound by both; "
        f"{gated} pod(s) created gated"
    )


def to_json(results: Sequence[compare.SeedResult], meta: Mapping[str, Any]) -> dict[str, Any]:
    t = compare.tally([v for r in results for v in r.verdicts])
    return {
        **meta,
        "summary": {
            "seeds": len(results),
            "pods": t.pods,
            "agreed": t.agreed,
            "percent": round(t.percent, 2),
            "failed_checks": t.failed,
            "known": t.known,
            "agreed_or_kube_bug": agreed_or_kube_bug(t)[0],
            "unexplained": t.unexplained,
            "errors": {str(r.seed): r.error for r in results if r.error},
        },
        "seeds": [_seed_json(r) for r in results],
    }


def _seed_json(r: compare.SeedResult) -> dict[str, Any]:
    t = r.tally
    return {
        "seed": r.seed,
        "nodes": r.nodes,
        "pods": r.pods,
        "agreed": t.agreed,
        "percent": round(t.percent, 2),
        "seconds": r.seconds,
        "error": r.error,
        "cluster_differs": r.cluster_differs,
        "verdicts": [
            {
                "pod": v.pod,
                "agrees": v.agrees,
                "failed": v.failed,
                "known": v.known,
                "kube-scheduler": v.kube.to_json(),
                "splitsched": v.ours.to_json(),
            }
            for v in r.verdicts
        ],
    }


def dumps(doc: Mapping[str, Any]) -> str:
    """The JSON of ``to_json``, indented, with each verdict on one line (a 100-seed run
    stays about 1 MB and greps by pod)."""
    marks: dict[str, str] = {}
    seeds = []
    for seed in doc.get("seeds", []):
        lines = []
        for verdict in seed["verdicts"]:
            mark = f"@@verdict-{len(marks)}@@"
            marks[f'"{mark}"'] = json.dumps(verdict, separators=(",", ":"))
            lines.append(mark)
        seeds.append({**seed, "verdicts": lines})
    text = json.dumps({**doc, "seeds": seeds}, indent=1)
    return re.sub(r'"@@verdict-\d+@@"', lambda m: marks[m.group(0)], text) + "\n"
