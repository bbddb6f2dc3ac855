"""What a soak reports: for each process (a series of samples, see ``sampling``) the
least-squares slope of RSS, fds, threads and asyncio tasks after the warm-up, the fitted
growth over that window, and whether the goals hold; as a markdown table, an SVG plot
(matplotlib, a dev dependency) and the JSON of everything.

The goals apply to the processes that live through the whole window (the watcher and the
schedulers after the hand-over; the binders restart every few minutes, so theirs is a
slope over each short life, reported without a verdict):
RSS growth <= ``MAX_RSS_GROWTH``, and fds and tasks flat: their fitted growth over the
window under ``flat_tolerance`` (one, or 2% of the mean where that is more: a count that
moves with the work in flight is not a leak).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.soak.sampling import Sample

MAX_RSS_GROWTH = 0.05
METRICS = ("rss_mib", "fds", "threads", "tasks")
#: A series must reach this close (seconds) to both ends of the window to get a verdict.
SPAN_SLACK = 60.0


def fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least squares ``y = a + b t``; returns (a, b). One point: (y, 0)."""
    n = len(points)
    if n == 0:
        return 0.0, 0.0
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return my, 0.0
    b = sum((t - mt) * (y - my) for t, y in points) / var
    return my - b * mt, b


def flat_tolerance(mean: float) -> float:
    return max(1.0, 0.02 * mean)


@dataclass
class Trend:
    """One metric of one process over the window."""

    slope_per_min: float
    start: float  # fitted, at the window's (or the series') first sample
    end: float  # fitted, at its last
    mean: float

    @property
    def growth(self) -> float:
        return self.end - self.start

    @property
    def growth_pct(self) -> float:
        return 100.0 * self.growth / self.start if self.start else 0.0


@dataclass
class SeriesReport:
    series: str
    name: str
    first_min: float
    last_min: float
    samples: int
    trends: dict[str, Trend]
    #: None: not alive through the window, no verdict.
    verdict: list[str] | None

    @property
    def ok(self) -> bool:
        return not self.verdict


def trend(samples: Sequence[Sample], metric: str) -> Trend | None:
    points = [(s.t, float(v)) for s in samples if (v := getattr(s, metric)) is not None]
    if not points:
        return None
    a, b = fit(points)
    t0, t1 = points[0][0], points[-1][0]
    mean = sum(y for _, y in points) / len(points)
    return Trend(round(b * 60, 4), round(a + b * t0, 3), round(a + b * t1, 3), round(mean, 3))


def analyse(
    samples: Sequence[Sample], *, warmup_s: float, end_s: float, judge: bool = True
) -> list[SeriesReport]:
    """One report per series, over its samples at or after ``warmup_s``; with ``judge``
    a verdict for the series alive through the whole window."""
    by: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.t >= warmup_s:
            by[s.series].append(s)
    out = []
    for series, group in sorted(by.items()):
        trends = {m: t for m in METRICS if (t := trend(group, m)) is not None}
        whole = group[0].t - warmup_s <= SPAN_SLACK and end_s - group[-1].t <= SPAN_SLACK
        out.append(
            SeriesReport(
                series=series,
                name=group[0].name,
                first_min=round(group[0].t / 60, 2),
                last_min=round(group[-1].t / 60, 2),
                samples=len(group),
                trends=trends,
                verdict=_verdict(trends) if whole and judge else None,
            )
        )
    return out


def _verdict(trends: dict[str, Trend]) -> list[str]:
    """The goals this series breaks (empty: all hold)."""
    out = []
    rss = trends.get("rss_mib")
    if rss is not None and rss.growth > MAX_RSS_GROWTH * rss.start:
        out.append(f"RSS grew {rss.growth_pct:.1f}% > {100 * MAX_RSS_GROWTH:.0f}%")
    for metric in ("fds", "tasks"):
        t = trends.get(metric)
        if t is not None and t.growth > flat_tolerance(t.mean):
            out.append(f"{metric} grew {t.growth:+.1f} (mean {t.mean:.1f})")
    return out


def _cell(t: Trend | None, unit: str = "") -> str:
    if t is None:
        return "-"
    return f"{t.start:.1f}→{t.end:.1f}{unit} ({t.slope_per_min:+.3f}/min)"


def table(reports: Sequence[SeriesReport]) -> str:
    """The markdown table: per process, each metric's fitted start→end and slope."""
    head = "| process | minutes | samples | RSS MiB | RSS growth | fds | threads | tasks | goals |"
    return "\n".join([head, "|---" * 9 + "|", *(_row(r) for r in reports)])


def _row(r: SeriesReport) -> str:
    rss = r.trends.get("rss_mib")
    if r.verdict is None:
        verdict = "n/a (not alive through the window, or a short run)"
    else:
        verdict = "ok" if r.ok else "; ".join(r.verdict)
    cells = [
        r.series,
        f"{r.first_min:.1f} to {r.last_min:.1f}",
        str(r.samples),
        _cell(rss),
        f"{rss.growth_pct:+.1f}%" if rss else "-",
        *(_cell(r.trends.get(m)) for m in ("fds", "threads", "tasks")),
        verdict,
    ]
    return "| " + " | ".join(cells) + " |"


def plot(samples: Sequence[Sample], path: Path, *, warmup_s: float, title: str) -> None:
    """Four panels (RSS, fds, threads, tasks) over minutes, one line per process."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        by[s.series].append(s)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    labels = {"rss_mib": "RSS (MiB)", "fds": "open fds", "threads": "threads",
              "tasks": "asyncio tasks"}  # fmt: skip
    for ax, metric in zip(axes.flat, METRICS, strict=True):
        for series, group in sorted(by.items()):
            pts = [(s.t / 60, v) for s in group if (v := getattr(s, metric)) is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=series, linewidth=1)
        ax.axvline(warmup_s / 60, color="grey", linestyle=":", linewidth=1)
        ax.set_ylabel(labels[metric])
        ax.grid(True, alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    axes[0][0].legend(fontsize=6, ncol=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)


def as_json(reports: Sequence[SeriesReport]) -> list[dict[str, object]]:
    return [{**asdict(r), "ok": r.ok} for r in reports]
