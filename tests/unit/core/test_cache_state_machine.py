"""Hypothesis state machine over the scheduler cache.

Random sequences of node and pod events, legal and illegal, against a plain-dict model of
kube-scheduler's cache state machine (Initial -> Assumed -> Added -> Deleted, Assumed ->
Forgotten). Legal events must land where the model says; illegal ones must raise CacheError
and leave everything untouched. After every step each node's requested resources must equal
the sum of the effective requests (+1 pod) of the pods the model places on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import hypothesis.strategies as st
import numpy as np
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from splitsched.core.cache import CacheError, PodState, SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.models import Container, Node, Pod

NODES = ("n0", "n1", "n2", "n3")
UIDS = tuple(f"p{i}" for i in range(8))
RESOURCES = ("cpu", "memory", "ephemeral-storage", "example.com/gpu", "vendor.io/fpga")

requests = st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 5000), max_size=3)
containers = st.lists(
    st.builds(
        Container,
        name=st.just("c"),
        requests=requests,
        restart_policy=st.sampled_from(["", "", "Always"]),
    ),
    max_size=3,
)
app_containers = st.lists(st.builds(Container, name=st.just("c"), requests=requests), max_size=3)


@st.composite
def pods(draw: st.DrawFn, uid: str) -> Pod:
    return Pod(
        uid=uid,
        namespace="ns",
        name=uid,
        containers=tuple(draw(app_containers)),
        init_containers=tuple(draw(containers)),
        overhead=draw(st.one_of(st.just({}), requests)),
        pod_requests=draw(st.one_of(st.just({}), requests)),
    )


nodes = st.builds(
    Node,
    name=st.sampled_from(NODES),
    allocatable=st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 10**6), max_size=4),
)


def expected_usage(pods_on_node: list[Pod]) -> dict[str, int]:
    """PodRequests summed over the node's pods, plus one `pods` each; zeros dropped, as
    NodeTable.requested_by_name reports."""
    total: dict[str, int] = {}
    for p in pods_on_node:
        for name, amount in p.requests.items():
            total[name] = total.get(name, 0) + amount
        total["pods"] = total.get("pods", 0) + 1
    return {k: v for k, v in total.items() if v}


@dataclasses.dataclass
class ModelPod:
    state: PodState
    node: str
    pod: Pod


class CacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.cache = SchedulerCache(clock=self.clock)
        self.nodes: set[str] = set()
        self.model: dict[str, ModelPod] = {}

    # ---- helpers ---------------------------------------------------------------------
    def snapshot(self) -> tuple[object, ...]:
        t = self.cache.table
        return (
            t.requested.copy(),
            t.nonzero_requested.copy(),
            list(t.names),
            {uid: self.cache.get(uid) for uid in UIDS},
            self.cache.pod_count(),
        )

    def assert_unchanged(self, before: tuple[object, ...]) -> None:
        after = self.snapshot()
        assert np.array_equal(before[0], after[0])  # type: ignore[arg-type]
        assert np.array_equal(before[1], after[1])  # type: ignore[arg-type]
        assert before[2:] == after[2:]

    def expect_error(self, fn: object, *args: object) -> None:
        before = self.snapshot()
        try:
            fn(*args)  # type: ignore[operator]
        except CacheError:
            pass
        else:
            raise AssertionError(f"{fn} {args} should have raised CacheError")
        self.assert_unchanged(before)

    # ---- nodes -----------------------------------------------------------------------
    @rule(node=nodes)
    def add_node(self, node: Node) -> None:
        self.cache.add_node(node)
        self.nodes.add(node.name)

    @rule(node=nodes)
    def update_node(self, node: Node) -> None:
        self.cache.update_node(node)
        self.nodes.add(node.name)

    @rule(name=st.sampled_from(NODES))
    def remove_node(self, name: str) -> None:
        if name in self.nodes:
            self.cache.remove_node(name)
            self.nodes.discard(name)
        else:
            self.expect_error(self.cache.remove_node, name)

    # ---- pods ------------------------------------------------------------------------
    @rule(data=st.data(), uid=st.sampled_from(UIDS), node=st.sampled_from(NODES))
    def assume(self, data: st.DataObject, uid: str, node: str) -> None:
        p = data.draw(pods(uid))
        if uid in self.model:
            self.expect_error(self.cache.assume, p, node)
            return
        self.cache.assume(p, node)
        self.model[uid] = ModelPod(PodState.ASSUMED, node, dataclasses.replace(p, node_name=node))

    @rule(uid=st.sampled_from(UIDS), dt=st.floats(0, 100))
    def finish_binding(self, uid: str, dt: float) -> None:
        self.clock.advance(dt)
        m = self.model.get(uid)
        assert self.cache.finish_binding(uid) is (m is not None and m.state is PodState.ASSUMED)
        got = self.cache.get(uid)
        if m is not None and m.state is PodState.ASSUMED:
            assert got is not None and got.binding_finished == self.clock.now()
            assert got.state is PodState.ASSUMED

    @rule(uid=st.sampled_from(UIDS))
    def forget(self, uid: str) -> None:
        m = self.model.get(uid)
        if m is None:
            before = self.snapshot()
            assert self.cache.forget(uid) is False
            self.assert_unchanged(before)
        elif m.state is PodState.ADDED:
            self.expect_error(self.cache.forget, uid)
        else:
            assert self.cache.forget(uid) is True
            del self.model[uid]

    @rule(data=st.data(), uid=st.sampled_from(UIDS), node=st.sampled_from(NODES))
    def add_pod(self, data: st.DataObject, uid: str, node: str) -> None:
        p = dataclasses.replace(data.draw(pods(uid)), node_name=node)
        self.cache.add_pod(p)
        self.model[uid] = ModelPod(PodState.ADDED, node, p)

    @rule(uid=st.sampled_from(UIDS))
    def add_unassigned_pod(self, uid: str) -> None:
        self.expect_error(self.cache.add_pod, Pod(uid=uid, namespace="ns", name=uid))

    @rule(uid=st.sampled_from(UIDS))
    def confirm_assumed(self, uid: str) -> None:
        """The common path: the watch shows the assumed pod, as assumed, on its node."""
        m = self.model.get(uid)
        if m is None or m.state is not PodState.ASSUMED:
            return
        self.cache.add_pod(m.pod)
        self.model[uid] = ModelPod(PodState.ADDED, m.node, m.pod)

    @rule(data=st.data(), uid=st.sampled_from(UIDS), node=st.sampled_from(NODES))
    def update_pod(self, data: st.DataObject, uid: str, node: str) -> None:
        p = dataclasses.replace(data.draw(pods(uid)), node_name=node)
        m = self.model.get(uid)
        if m is None or m.state is not PodState.ADDED:
            self.expect_error(self.cache.update_pod, p)
            return
        self.cache.update_pod(p)
        self.model[uid] = ModelPod(PodState.ADDED, node, p)

    @rule(uid=st.sampled_from(UIDS))
    def remove_pod(self, uid: str) -> None:
        if uid not in self.model:
            self.expect_error(self.cache.remove_pod, uid)
            return
        self.cache.remove_pod(uid)
        del self.model[uid]

    # ---- invariants ------------------------------------------------------------------
    @invariant()
    def usage_matches_model(self) -> None:
        self.cache.check_invariants()
        assert sorted(self.cache.node_names()) == sorted(self.nodes)
        assert self.cache.pod_count() == len(self.model)
        per_node: dict[str, list[Pod]] = {}
        for uid, m in self.model.items():
            got = self.cache.get(uid)
            assert got is not None
            assert got.state is m.state
            assert got.node_name == m.node == got.pod.node_name
            assert got.pod == m.pod
            per_node.setdefault(m.node, []).append(m.pod)
        for name in self.nodes:
            want: Mapping[str, int] = expected_usage(per_node.get(name, []))
            assert dict(self.cache.table.requested_by_name(name)) == want
        for name in NODES:
            assert {p.uid for p in self.cache.pods_on(name)} == {
                p.uid for p in per_node.get(name, [])
            }
        assumed = {c.uid for c in self.cache.assumed_pods()}
        assert assumed == {u for u, m in self.model.items() if m.state is PodState.ASSUMED}


CacheMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)
test_cache_state_machine = CacheMachine.TestCase
