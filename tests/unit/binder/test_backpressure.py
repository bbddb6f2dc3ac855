"""The binder's buffers stay bounded when the scheduler repeats decisions the binder already
finished while its outcome reporter cannot deliver (docs/backpressure.md)."""

from __future__ import annotations

import asyncio

from services.binder.jobs import BOUND, BindJob, BindResult
from services.binder.kubeapi import KubeClient, KubeEndpoint
from services.binder.metrics import BinderMetrics
from services.binder.reporter import OutcomeReporter
from services.binder.worker import BindingPool


def _job(i: int) -> BindJob:
    return BindJob(f"d{i}", "ns", f"p{i}", f"uid-{i}", "n1", deadline=0.0, max_attempts=1)


async def _repeat_finished(count: int, *, max_pending: int) -> tuple[float, float]:
    """`count` finished decisions submitted again to a pool whose reporter buffer is full
    (it holds one outcome and is never started, as with a scheduler unreachable): the
    side-writes gauge, and the intake queue's, after every re-submission."""
    metrics = BinderMetrics()
    reporter = OutcomeReporter(target="127.0.0.1:1", binder_id="b", metrics=metrics, max_buffer=1)
    kube = KubeClient(KubeEndpoint(host="http://127.0.0.1:1"))
    pool = BindingPool(
        kube=kube, reporter=reporter, metrics=metrics, binder_id="b", max_pending=max_pending
    )
    bound = BindResult(BOUND, "bound", 1, 201)
    for i in range(count):
        pool._remember(pool._report(_job(i), bound, trace_context={}))
    for i in range(count):
        assert pool.submit(_job(i)) is None  # known finished: accepted, reported again
    await asyncio.sleep(0)
    side = metrics.registry.get_sample_value("splitsched_binder_side_writes")
    queued = metrics.registry.get_sample_value("splitsched_binder_queued")
    for task in list(pool._side_tasks):
        task.cancel()
    await asyncio.gather(*pool._side_tasks, return_exceptions=True)
    await kube.close()
    return side or 0.0, queued or 0.0


def test_repeated_finished_decisions_do_not_pile_up_tasks() -> None:
    side, queued = asyncio.run(_repeat_finished(500, max_pending=10))
    assert side == 10  # without the cap: 500 tasks, each holding an outcome
    assert queued == 0  # nothing was bound twice
