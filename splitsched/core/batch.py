"""Schedule a fixed set of pending pods against a fixed cluster, in queue order.

The offline path: `splitsched simulate --cluster FILE`, `make demo` (before the services
run) and the core benchmark. Bound pods are loaded as allocated, then each pending pod
goes through the algorithm once, in the scheduling queue's order (priority, then
arrival), and is assumed where it lands so later pods see it. Pure: the caller reads files.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from splitsched.core import algorithm, framework, models, storage
from splitsched.core.cache import SchedulerCache


@dataclass(frozen=True, slots=True)
class Placement:
    pod: models.Pod
    node: str | None
    reasons: Mapping[str, int]
    summary: str


def queue_order_key(pod: models.Pod) -> tuple[int, float, str]:
    """The active queue's order: higher priority first, then earlier creation."""
    return (-pod.priority, pod.creation_timestamp, pod.key)


def build(
    *,
    nodes: Sequence[models.Node],
    bound_pods: Sequence[models.Pod],
    profiles: Mapping[str, framework.Profile],
    seed: int = 0,
    storage_objects: Sequence[storage.StorageObject] = (),
) -> algorithm.FrameworkAlgorithm:
    """An algorithm whose cache holds these nodes, storage objects and already-bound pods."""
    cache = SchedulerCache()
    for node in nodes:
        cache.add_node(node)
    for obj in storage_objects:
        cache.table.storage.set(obj)
    for pod in bound_pods:
        cache.add_pod(pod)
    return algorithm.FrameworkAlgorithm(cache=cache, profiles=profiles, rng=random.Random(seed))


def split_pods(
    pods: Sequence[models.Pod], *, scheduler_names: set[str], all_pending: bool, default: str
) -> tuple[list[models.Pod], list[models.Pod]]:
    """(bound, pending-for-us). Terminal pods hold nothing and are dropped, and so are
    gated pods (the scheduler never tries them); with `all_pending`, pending pods of any
    schedulerName are scheduled with `default`."""
    bound: list[models.Pod] = []
    pending: list[models.Pod] = []
    for pod in pods:
        if pod.is_terminal:
            continue
        if pod.node_name:
            bound.append(pod)
        elif pod.scheduling_gates:
            continue
        elif pod.scheduler_name in scheduler_names:
            pending.append(pod)
        elif all_pending:
            pending.append(replace(pod, scheduler_name=default))
    return bound, pending


def schedule_all(
    algo: algorithm.FrameworkAlgorithm, pending: Sequence[models.Pod]
) -> Iterator[Placement]:
    for pod in sorted(pending, key=queue_order_key):
        result = algo.schedule(pod)
        if result.bind is not None:
            status = algo.assume(pod, result.bind.node, result.state)
            if status.ok:
                algo.cache.finish_binding(pod.uid)
                yield Placement(pod, result.bind.node, {}, "")
                continue
            reasons = {r: 1 for r in status.reasons}
            yield Placement(pod, None, reasons, "; ".join(status.reasons))
            continue
        wait = result.wait if result.wait is not None else result.preempt.wait  # type: ignore[union-attr]
        yield Placement(pod, None, dict(wait.reason_counts), wait.summary)
