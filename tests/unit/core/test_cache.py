"""Unit tests of the scheduler cache's pod state machine (kube-scheduler's cache semantics,
minus TTL expiry) and of how it keeps the node table's counts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from splitsched.core.cache import CacheError, PodState, SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.models import Container, Node, Pod

GI = 1024**3
MI = 1024**2
GPU = "example.com/gpu"


def node(name: str, *, cpu: int = 4000, memory: int = 8 * GI, gpus: int = 0) -> Node:
    alloc = {"cpu": cpu, "memory": memory, "pods": 110}
    if gpus:
        alloc[GPU] = gpus
    return Node(name=name, allocatable=alloc)


def pod(uid: str, *, cpu: int = 0, memory: int = 0, node_name: str = "", **kw: object) -> Pod:
    req = {}
    if cpu:
        req["cpu"] = cpu
    if memory:
        req["memory"] = memory
    return Pod(
        uid=uid,
        namespace="default",
        name=uid,
        node_name=node_name,
        containers=(Container(name="c", requests=req),),
        **kw,  # type: ignore[arg-type]
    )


def make(*names: str) -> tuple[SchedulerCache, FakeClock]:
    clock = FakeClock(100.0)
    cache = SchedulerCache(clock=clock)
    for n in names:
        cache.add_node(node(n))
    return cache, clock


def used(cache: SchedulerCache, name: str) -> dict[str, int]:
    return dict(cache.table.requested_by_name(name))


def test_assume_counts_the_pod_on_its_node() -> None:
    cache, _ = make("a", "b")
    cached = cache.assume(pod("p", cpu=500, memory=GI), "a")
    assert cached.state is PodState.ASSUMED
    assert cached.pod.node_name == "a"
    assert cache.is_assumed("p")
    assert used(cache, "a") == {"cpu": 500, "memory": GI, "pods": 1}
    assert used(cache, "b") == {}
    assert [p.uid for p in cache.pods_on("a")] == ["p"]
    cache.check_invariants()


def test_assume_twice_is_refused_and_changes_nothing() -> None:
    cache, _ = make("a", "b")
    cache.assume(pod("p", cpu=500), "a")
    with pytest.raises(CacheError, match="is in the cache"):
        cache.assume(pod("p", cpu=500), "b")
    assert used(cache, "a") == {"cpu": 500, "pods": 1}
    assert used(cache, "b") == {}
    got = cache.get("p")
    assert got is not None and got.node_name == "a"


def test_assume_an_added_pod_is_refused() -> None:
    cache, _ = make("a")
    cache.add_pod(pod("p", cpu=100, node_name="a"))
    with pytest.raises(CacheError):
        cache.assume(pod("p", cpu=100), "a")
    assert used(cache, "a") == {"cpu": 100, "pods": 1}


def test_finish_binding_records_time_and_never_expires() -> None:
    cache, clock = make("a")
    cache.assume(pod("p", cpu=300), "a")
    clock.advance(2.5)
    assert cache.finish_binding("p") is True
    # Old kube-scheduler expired assumed pods 30 s after binding finished; there is no TTL.
    clock.advance(3600)
    got = cache.get("p")
    assert got is not None
    assert got.state is PodState.ASSUMED
    assert got.assumed_at == 100.0
    assert got.binding_finished == 102.5
    assert used(cache, "a") == {"cpu": 300, "pods": 1}
    [stale] = cache.assumed_pods()
    assert (stale.uid, stale.assumed_at, stale.binding_finished) == ("p", 100.0, 102.5)


def test_finish_binding_of_a_pod_not_assumed_is_a_no_op() -> None:
    cache, _ = make("a")
    assert cache.finish_binding("missing") is False
    cache.add_pod(pod("q", node_name="a"))
    assert cache.finish_binding("q") is False
    got = cache.get("q")
    assert got is not None and got.binding_finished is None


def test_assumed_pods_lists_oldest_first_and_only_assumed() -> None:
    cache, clock = make("a")
    cache.assume(pod("late"), "a")
    clock.advance(1)
    cache.assume(pod("later"), "a")
    cache.add_pod(pod("bound", node_name="a"))
    assert [c.uid for c in cache.assumed_pods()] == ["late", "later"]


def test_forget_releases_an_assumed_pod() -> None:
    cache, _ = make("a")
    cache.assume(pod("p", cpu=700, memory=MI), "a")
    assert cache.forget("p") is True
    assert cache.get("p") is None
    assert used(cache, "a") == {}
    assert cache.pod_count() == 0
    cache.check_invariants()


def test_forget_an_added_pod_is_refused() -> None:
    cache, _ = make("a")
    cache.assume(pod("p", cpu=700), "a")
    cache.add_pod(pod("p", cpu=700, node_name="a"))
    with pytest.raises(CacheError, match="not assumed"):
        cache.forget("p")
    assert used(cache, "a") == {"cpu": 700, "pods": 1}


def test_forget_a_pod_not_in_cache_is_a_no_op() -> None:
    cache, _ = make("a")
    assert cache.forget("nobody") is False


def test_add_confirms_an_assumed_pod_without_double_counting() -> None:
    cache, clock = make("a")
    cache.assume(pod("p", cpu=250), "a")
    cache.finish_binding("p")
    clock.advance(1)
    cached = cache.add_pod(pod("p", cpu=250, node_name="a", resource_version="7"))
    assert cached.state is PodState.ADDED
    assert cached.pod.resource_version == "7"
    assert cached.assumed_at == 100.0
    assert not cache.is_assumed("p")
    assert used(cache, "a") == {"cpu": 250, "pods": 1}
    assert cache.pod_count() == 1
    assert cache.assumed_pods() == []
    cache.check_invariants()


def test_add_on_another_node_than_assumed_moves_the_counts() -> None:
    cache, _ = make("a", "b")
    cache.assume(pod("p", cpu=250), "a")
    cache.add_pod(pod("p", cpu=250, node_name="b"))
    assert used(cache, "a") == {}
    assert used(cache, "b") == {"cpu": 250, "pods": 1}
    got = cache.get("p")
    assert got is not None and got.node_name == "b" and got.state is PodState.ADDED
    cache.check_invariants()


def test_add_of_a_pod_bound_by_someone_else() -> None:
    cache, _ = make("a")
    cache.add_pod(pod("p", cpu=1000, memory=2 * GI, node_name="a"))
    got = cache.get("p")
    assert got is not None and got.state is PodState.ADDED and got.assumed_at is None
    assert used(cache, "a") == {"cpu": 1000, "memory": 2 * GI, "pods": 1}


def test_add_of_an_added_pod_acts_as_update() -> None:
    cache, _ = make("a")
    cache.add_pod(pod("p", cpu=1000, node_name="a"))
    cache.add_pod(pod("p", cpu=1500, node_name="a"))
    assert used(cache, "a") == {"cpu": 1500, "pods": 1}
    assert cache.pod_count() == 1


def test_add_without_a_node_is_refused() -> None:
    cache, _ = make("a")
    with pytest.raises(CacheError):
        cache.add_pod(pod("p", cpu=1))
    assert cache.pod_count() == 0


def test_update_changes_requests_and_node() -> None:
    cache, _ = make("a", "b")
    cache.add_pod(pod("p", cpu=100, node_name="a"))
    cache.update_pod(pod("p", cpu=400, memory=GI, node_name="a"))
    assert used(cache, "a") == {"cpu": 400, "memory": GI, "pods": 1}
    cache.update_pod(pod("p", cpu=400, memory=GI, node_name="b"))
    assert used(cache, "a") == {}
    assert used(cache, "b") == {"cpu": 400, "memory": GI, "pods": 1}
    cache.check_invariants()


def test_update_of_unknown_or_assumed_pod_is_refused() -> None:
    cache, _ = make("a")
    with pytest.raises(CacheError, match="not in the cache"):
        cache.update_pod(pod("p", cpu=1, node_name="a"))
    cache.assume(pod("q", cpu=100), "a")
    with pytest.raises(CacheError, match="assumed"):
        cache.update_pod(pod("q", cpu=900, node_name="a"))
    assert used(cache, "a") == {"cpu": 100, "pods": 1}
    assert cache.is_assumed("q")


def test_remove_frees_assumed_and_added_pods() -> None:
    cache, _ = make("a")
    cache.assume(pod("assumed", cpu=100), "a")
    cache.add_pod(pod("added", cpu=200, node_name="a"))
    assert used(cache, "a") == {"cpu": 300, "pods": 2}
    cache.remove_pod("assumed")
    assert used(cache, "a") == {"cpu": 200, "pods": 1}
    removed = cache.remove_pod("added")
    assert removed.uid == "added"
    assert used(cache, "a") == {}
    assert cache.pod_count() == 0
    with pytest.raises(CacheError, match="not in the cache"):
        cache.remove_pod("added")


def test_pod_seen_before_its_node_is_counted_when_the_node_arrives() -> None:
    cache, _ = make()
    cache.add_pod(pod("p", cpu=600, node_name="late"))
    assert cache.pod_count() == 1
    assert "late" not in cache.node_names()
    assert [p.uid for p in cache.pods_on("late")] == ["p"]
    cache.check_invariants()
    cache.add_node(node("late"))
    assert used(cache, "late") == {"cpu": 600, "pods": 1}
    cache.check_invariants()


def test_pods_of_a_deleted_node_are_kept_and_recounted() -> None:
    cache, _ = make("a", "b")
    cache.add_pod(pod("p1", cpu=100, node_name="a"))
    cache.assume(pod("p2", cpu=200), "a")
    cache.add_pod(pod("p3", cpu=400, node_name="b"))
    cache.remove_node("a")
    assert cache.node_names() == ["b"]
    assert cache.pod_count() == 3
    assert {p.uid for p in cache.pods_on("a")} == {"p1", "p2"}
    cache.check_invariants()
    # A pod deleted while its node is gone is not counted when the node comes back.
    cache.remove_pod("p1")
    cache.add_node(node("a"))
    assert used(cache, "a") == {"cpu": 200, "pods": 1}
    assert used(cache, "b") == {"cpu": 400, "pods": 1}
    cache.check_invariants()


def test_forget_on_a_deleted_node() -> None:
    cache, _ = make("a")
    cache.assume(pod("p", cpu=200), "a")
    cache.remove_node("a")
    assert cache.forget("p") is True
    cache.add_node(node("a"))
    assert used(cache, "a") == {}
    cache.check_invariants()


def test_remove_unknown_node_is_refused() -> None:
    cache, _ = make("a")
    with pytest.raises(CacheError):
        cache.remove_node("zzz")
    assert cache.node_names() == ["a"]


def test_update_node_keeps_its_pods_and_new_allocatable() -> None:
    cache, _ = make("a")
    cache.add_pod(pod("p", cpu=100, node_name="a"))
    cache.update_node(node("a", cpu=8000))
    assert used(cache, "a") == {"cpu": 100, "pods": 1}
    row = cache.table.row_of["a"]
    assert int(cache.table.allocatable[row, cache.table.resource_col["cpu"]]) == 8000
    cache.update_node(node("new"))  # an update for a node never seen adds it
    assert sorted(cache.node_names()) == ["a", "new"]


def test_effective_requests_with_init_containers_sidecars_and_overhead() -> None:
    cache, _ = make("a")
    # PodRequests: app containers 100m + 200m = 300m; a plain init container of 500m runs
    # alone, so the peak is max(300, 500) = 500m; overhead adds 50m.
    p1 = Pod(
        uid="p1",
        namespace="d",
        name="p1",
        containers=(
            Container(name="a", requests={"cpu": 100}),
            Container(name="b", requests={"cpu": 200}),
        ),
        init_containers=(Container(name="i", requests={"cpu": 500}),),
        overhead={"cpu": 50, "memory": 10 * MI},
    )
    cache.assume(p1, "a")
    assert used(cache, "a") == {"cpu": 550, "memory": 10 * MI, "pods": 1}
    # A sidecar (restartPolicy Always) of 100m runs with the app container of 200m: 300m;
    # a plain init container of 300m after it peaks at 300 + 100 = 400m.
    p2 = Pod(
        uid="p2",
        namespace="d",
        name="p2",
        containers=(Container(name="a", requests={"cpu": 200}),),
        init_containers=(
            Container(name="side", requests={"cpu": 100}, restart_policy="Always"),
            Container(name="init", requests={"cpu": 300}),
        ),
    )
    cache.add_pod(dataclasses.replace(p2, node_name="a"))
    assert used(cache, "a") == {"cpu": 950, "memory": 10 * MI, "pods": 2}
    cache.check_invariants()


def test_extended_resources_and_nonzero_defaults() -> None:
    cache = SchedulerCache(clock=FakeClock())
    cache.add_node(node("g", gpus=8))
    gpu_pod = Pod(
        uid="g1",
        namespace="d",
        name="g1",
        containers=(Container(name="c", requests={GPU: 2}),),
    )
    cache.assume(gpu_pod, "g")
    assert used(cache, "g") == {GPU: 2, "pods": 1}
    # A container asking for no cpu/memory counts as 100m / 200Mi for scoring.
    row = cache.table.row_of["g"]
    assert cache.table.nonzero_requested[row].tolist() == [100, 200 * MI]
    cache.forget("g1")
    assert cache.table.nonzero_requested[row].tolist() == [0, 0]
    cache.check_invariants()


def test_extended_resource_on_a_node_without_it_gets_a_column() -> None:
    cache, _ = make("plain")
    gpu_pod = Pod(
        uid="g1",
        namespace="d",
        name="g1",
        node_name="plain",
        containers=(Container(name="c", requests={GPU: 1}),),
    )
    cache.add_pod(gpu_pod)
    assert used(cache, "plain") == {GPU: 1, "pods": 1}
    cache.remove_pod("g1")
    assert used(cache, "plain") == {}
    cache.check_invariants()


def test_check_invariants_detects_drift() -> None:
    cache, _ = make("a")
    cache.add_pod(pod("p", cpu=100, node_name="a"))
    cache.check_invariants()
    row = cache.table.row_of["a"]
    cache.table._requested[row, 0] += 1
    with pytest.raises(CacheError, match="requested"):
        cache.check_invariants()


def test_check_invariants_detects_a_pod_counted_on_the_wrong_node() -> None:
    cache, _ = make("a", "b")
    cache.add_pod(pod("p", cpu=100, node_name="a"))
    cache.table.add_pod("b", pod("p", cpu=100, node_name="a"))
    with pytest.raises(CacheError, match="node b counts pods"):
        cache.check_invariants()


def test_many_nodes_row_moves_keep_counts() -> None:
    cache, _ = make(*(f"n{i}" for i in range(10)))
    for i in range(10):
        cache.add_pod(pod(f"p{i}", cpu=10 * (i + 1), node_name=f"n{i}"))
    for i in (0, 3, 9):
        cache.remove_node(f"n{i}")
    for i in range(10):
        if i not in (0, 3, 9):
            assert used(cache, f"n{i}") == {"cpu": 10 * (i + 1), "pods": 1}
    assert int(np.sum(cache.table.requested[:, 0])) == sum(10 * (i + 1) for i in range(10)) - (
        10 + 40 + 100
    )
    cache.check_invariants()
