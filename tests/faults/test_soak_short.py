"""The soak, two minutes of it (issue 22): ``bench.soak`` itself with ``minutes=2`` on its
own control plane and 200 kwok nodes. Deployments scaled and rolled out, Jobs completing,
pods deleted mid-bind, gangs, nodes added, cordoned and deleted, preemption rounds against
PDB-guarded pods, a rolling restart of the binders, a leader hand-over and cut watches.

Asserts the promises only (checked every 30 s from the API server's objects, and by every
preemption round's ``mixedload.check``), and that each kind of churn and disruption really
happened; no growth and no timing is asserted (``make soak MINUTES=30`` records those).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak.churn import PERIODS
from bench.soak.run import Options, Soak

pytestmark = pytest.mark.faults


@pytest.mark.timeout(900)
def test_two_minutes_of_churn_lose_nothing(tmp_path: Path) -> None:
    result = Soak(Options(minutes=2, workdir=tmp_path)).run()
    assert result.invariant_failures() == [], result.tracebacks
    assert len(result.checks) >= 4 and all(c.ok for c in result.checks)
    assert set(result.churn) == set(PERIODS), result.churn
    assert result.rounds and sum(r.evicted for r in result.rounds) > 0
    done = " ".join(what for _, what in result.disruptions)
    for expected in ("binder-0 restarted", "binder-1 restarted", "led", "watches cut"):
        assert expected in done, result.disruptions
    # Every service served the asyncio task gauge the soak samples.
    sampled = {s.name for s in result.samples if s.tasks is not None}
    assert {"watcher", "binder-0", "binder-1"} <= sampled, sampled
