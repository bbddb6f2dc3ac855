"""kube-scheduler as the oracle for Dynamic Resource Allocation (issue 23): the agreement
harness with ``--features +devices``.

For two seeds at the default sizes, with every default feature and devices on (classes
with CEL selectors, GPUs on some nodes, a network-attached pool, pods with their own or
a shared ResourceClaim): every pod binds or not as it does under kube-scheduler, with
the same feasible set; every FailedScheduling message is kube-scheduler's, or differs
only by a documented difference (``bench/agreement/known.py``). splitsched's run is
given kube-scheduler's claim allocations after each pod (``bench/agreement/deviceops``),
so both schedulers see the same devices in use.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.agreement import features, known, report, runner, scenario

pytestmark = pytest.mark.e2e

SEEDS = (1, 2)


@pytest.fixture(scope="module")
def session() -> Iterator[runner.Session]:
    with runner.Session() as running:
        yield running


def test_splitsched_agrees_with_kube_scheduler_on_devices(session: runner.Session) -> None:
    chosen = features.parse("+devices")
    scenes = [scenario.build(seed, chosen=chosen) for seed in SEEDS]
    results = runner.run_seeds(session, scenes)
    for result in results:
        print(report.seed_table(result))
    assert all(r.error is None and r.cluster_differs is None for r in results)
    verdicts = [v for r in results for v in r.verdicts]
    claimed = {
        p["metadata"]["name"] for s in scenes for p in s.pods if p["spec"].get("resourceClaims")
    }
    with_claims = [v for v in verdicts if v.pod in claimed]
    # Pods with claims are compared, and some of them bind: kube-scheduler allocated
    # devices for them.
    assert with_claims and any(v.kube.node for v in with_claims)
    assert any(claims for v in with_claims for claims in v.kube.claims.values())
    for check in ("binds", "feasible", "placement", "gated"):
        assert not [v.pod for v in verdicts if v.checks[check] is False], check
    unexplained = [v for v in verdicts if not v.agrees and not v.known]
    assert not unexplained, report.summary(results)
    # What differs is kube-scheduler's documented bug only: DynamicResources' PostFilter
    # words agree too ("still not schedulable" once its PreFilter read the claims).
    ours = [v.pod for v in verdicts if not v.agrees and not known.kube_bug(v.known)]
    assert not ours, report.summary(results)
