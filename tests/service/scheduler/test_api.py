"""The Scheduler API servicer in process: a real gRPC server over a `SchedulerState` fed by
hand (fake clock, no watcher, no API server), called through real channels. Covers what
the e2e tier cannot arrange precisely: paging under concurrent changes, Simulate leaving
the view untouched when it fails half-way, input limits, the decision stream's replay, and
the CLI's TLS flags against a TLS server (certificates made with openssl).

Each test runs its own event loop (``asyncio.run``); CLI calls run in a worker thread so
the in-process server keeps answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from services.scheduler import api_input, api_views
from services.scheduler.api import SchedulerApi
from services.scheduler.state import Outcome, SchedulerState
from splitsched import cli, wire
from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.support.scheduler import schedule_all, serving

T = TypeVar("T")
GI = 1024**3
Code = grpc.StatusCode


def node(
    name: str,
    *,
    cpu: int = 4000,
    labels: dict[str, str] | None = None,
    taints: tuple[models.Taint, ...] = (),
) -> models.Node:
    return models.Node(
        name=name,
        allocatable={models.CPU: cpu, models.MEMORY: 8 * GI, models.PODS: 110},
        labels=labels or {},
        taints=taints,
    )


def pod(name: str, *, ns: str = "ns", cpu: int = 500, **kw: Any) -> models.Pod:
    return models.Pod(
        uid=f"uid-{ns}-{name}",
        namespace=ns,
        name=name,
        scheduler_name="splitsched",
        containers=(models.Container("c", {models.CPU: cpu, models.MEMORY: GI}),),
        **kw,
    )


def make_state(nodes: list[models.Node]) -> SchedulerState:
    clock = FakeClock(1000.0)
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock), profiles=profiles.load_profiles(None)
    )
    state = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="s"
    )
    for n in nodes:
        state.apply_node("ADDED", n)
    state.mark_synced()
    return state


def fingerprint(state: SchedulerState) -> tuple[object, ...]:
    """Everything Simulate must leave as it found it."""
    table = state.cache.table
    return (
        table.requested.tolist(),
        [sorted(row) for row in table.pods],
        sorted((c.uid, c.state.value, c.node_name) for c in state.cache),
        state.algo.rng.getstate(),
        len(state.queue),
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def expect_error(call: Any, code: grpc.StatusCode) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, info.value.details()
    return str(info.value.details())


# ---- pods -----------------------------------------------------------------------------------


def test_get_pod_follows_waiting_binding_bound_with_attempts_and_reasons() -> None:
    state = make_state([node("a", cpu=1000), node("b", cpu=1000)])
    state.apply_pod("ADDED", pod("big", cpu=5000))
    state.apply_pod("ADDED", pod("web", cpu=500))
    schedule_all(state)

    async def go() -> None:
        async with serving(state) as s:
            big = await s.stub.GetPod(scheduler_pb2.GetPodRequest(namespace="ns", name="big"))
            assert big.state == scheduler_pb2.WAITING
            assert big.scheduling_attempts == 1 and big.node == ""
            assert big.message == (
                "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
                "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
            )
            assert {(f.node, tuple(f.reasons)) for f in big.last_failures} == {
                ("a", ("Insufficient cpu",)),
                ("b", ("Insufficient cpu",)),
            }
            assert big.queue == "unschedulable" and big.HasField("last_attempt")
            web = await s.stub.GetPod(scheduler_pb2.GetPodRequest(namespace="ns", name="web"))
            assert web.state == scheduler_pb2.BINDING and web.node in ("a", "b")
            decision_id = state.decision_of_pod["uid-ns-web"]
            state.on_outcome(decision_id=decision_id, result=Outcome.BOUND, attempts=2)
            web = await s.stub.GetPod(scheduler_pb2.GetPodRequest(namespace="ns", name="web"))
            assert web.state == scheduler_pb2.BOUND and web.bind_attempts == 2
            assert web.scheduler_name == "splitsched" and web.message == ""

    run(go())


def test_last_failures_name_the_plugin_that_rejected_each_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    gpu = models.Taint("gpu", "true", "NoSchedule")
    state = make_state([node("small", cpu=1000), node("gpu", cpu=8000, taints=(gpu,))])
    state.apply_pod("ADDED", pod("big", cpu=5000))
    schedule_all(state)

    async def go() -> None:
        async with serving(state) as s:
            big = await s.stub.GetPod(scheduler_pb2.GetPodRequest(namespace="ns", name="big"))
            assert big.state == scheduler_pb2.WAITING
            assert {(f.node, f.plugin, tuple(f.reasons)) for f in big.last_failures} == {
                ("small", "NodeResourcesFit", ("Insufficient cpu",)),
                ("gpu", "TaintToleration", ("node(s) had untolerated taint(s)",)),
            }
            argv = ["pods", "ns/big", "--server", s.target, "--timeout", "10"]
            code = await asyncio.to_thread(cli.main, argv)
            out, err = capsys.readouterr()
            assert code == 0, err
            rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[-2:]}
            assert "PLUGIN" in out and rows == {
                "small": "NodeResourcesFit",
                "gpu": "TaintToleration",
            }, out

    run(go())


def test_unknown_pod_is_not_found_and_missing_names_are_invalid() -> None:
    state = make_state([node("a")])

    async def go() -> None:
        async with serving(state) as s:
            msg = await expect_error(
                s.stub.GetPod(scheduler_pb2.GetPodRequest(namespace="ns", name="nope")),
                Code.NOT_FOUND,
            )
            assert "ns/nope" in msg
            await expect_error(
                s.stub.Explain(scheduler_pb2.ExplainRequest(namespace="ns", name="nope")),
                Code.NOT_FOUND,
            )
            msg = await expect_error(
                s.stub.GetPod(scheduler_pb2.GetPodRequest(name="x")), Code.INVALID_ARGUMENT
            )
            assert "namespace" in msg

    run(go())


def test_reads_before_sync_are_unavailable() -> None:
    state = make_state([node("a")])
    state.synced = False

    async def go() -> None:
        async with serving(state) as s:
            await expect_error(s.stub.ListNodes(scheduler_pb2.ListNodesRequest()), Code.UNAVAILABLE)
            await expect_error(
                s.stub.Simulate(scheduler_pb2.SimulateRequest(manifests=["metadata: {name: x}"])),
                Code.UNAVAILABLE,
            )

    run(go())


def test_list_pods_pages_are_stable_while_pods_come_and_go() -> None:
    state = make_state([node("a", cpu=100_000)])
    for ns in ("ns1", "ns2"):
        for i in range(5):
            state.apply_pod("ADDED", pod(f"p{i}", ns=ns, cpu=10))

    async def go() -> None:
        async with serving(state) as s:
            request = scheduler_pb2.ListPodsRequest(namespace="ns1", page_size=2)
            first = await s.stub.ListPods(request)
            assert [p.pod.name for p in first.pods] == ["p0", "p1"]
            # Between pages: one pod before the cursor appears, one after it goes away.
            state.apply_pod("ADDED", pod("a-new", ns="ns1", cpu=10))
            state.apply_pod("DELETED", pod("p3", ns="ns1", cpu=10))
            names = [p.pod.name for p in first.pods]
            request.page_token = first.next_page_token
            while request.page_token:
                page = await s.stub.ListPods(request)
                names += [p.pod.name for p in page.pods]
                request.page_token = page.next_page_token
            assert names == ["p0", "p1", "p2", "p4"]  # nothing repeated, nothing skipped
            # Every namespace, sorted by namespace then name; state filter.
            everything = await s.stub.ListPods(scheduler_pb2.ListPodsRequest())
            keys = [(p.pod.namespace, p.pod.name) for p in everything.pods]
            assert keys == sorted(keys) and len(keys) == 10 and not everything.next_page_token
            bound = await s.stub.ListPods(scheduler_pb2.ListPodsRequest(state=scheduler_pb2.BOUND))
            assert list(bound.pods) == []
            # Bad tokens and sizes.
            for bad in ("garbage!", "eyJ4IjoxfQ", first.next_page_token + "x"):
                msg = await expect_error(
                    s.stub.ListPods(scheduler_pb2.ListPodsRequest(page_token=bad)),
                    Code.INVALID_ARGUMENT,
                )
                assert msg.startswith("page_token:")
            msg = await expect_error(
                s.stub.ListPods(
                    scheduler_pb2.ListPodsRequest(namespace="ns2", page_token=first.next_page_token)
                ),
                Code.INVALID_ARGUMENT,
            )
            assert "different filters" in msg
            await expect_error(
                s.stub.ListPods(scheduler_pb2.ListPodsRequest(page_size=-1)),
                Code.INVALID_ARGUMENT,
            )

    run(go())


# ---- nodes ----------------------------------------------------------------------------------


def test_list_nodes_reports_usage_taints_and_pages() -> None:
    gpu = models.Taint("gpu", "true", "NoSchedule")
    state = make_state([node(f"n{i}", cpu=2000, labels={"i": str(i)}) for i in range(5)])
    state.apply_node("MODIFIED", node("n4", cpu=2000, taints=(gpu,)))
    state.apply_pod("ADDED", pod("bound", cpu=1500, node_name="n1"))

    async def go() -> None:
        async with serving(state) as s:
            names: list[str] = []
            request = scheduler_pb2.ListNodesRequest(page_size=2, include_pods=True)
            views: dict[str, scheduler_pb2.NodeView] = {}
            while True:
                page = await s.stub.ListNodes(request)
                names += [n.name for n in page.nodes]
                views.update({n.name: n for n in page.nodes})
                if not page.next_page_token:
                    break
                request.page_token = page.next_page_token
            assert names == ["n0", "n1", "n2", "n3", "n4"]
            n1 = views["n1"]
            assert n1.allocatable["cpu"] == 2000 and n1.requested["cpu"] == 1500
            assert n1.free["cpu"] == 500 and n1.free["memory"] == 7 * GI
            assert n1.pod_count == 1 and [p.name for p in n1.pods] == ["bound"]
            assert n1.labels["i"] == "1"
            assert [(t.key, t.value, t.effect) for t in views["n4"].taints] == [
                ("gpu", "true", "NoSchedule")
            ]
            assert views["n4"].version == 2 and views["n0"].version == 1
            only = await s.stub.ListNodes(scheduler_pb2.ListNodesRequest(name_prefix="n3"))
            assert [n.name for n in only.nodes] == ["n3"] and not only.nodes[0].pods

    run(go())


# ---- explain --------------------------------------------------------------------------------


def test_explain_counts_every_plugin_by_reason_and_node_class() -> None:
    state = make_state(
        [
            node(
                "tainted",
                labels={"disk": "ssd", "topology.kubernetes.io/zone": "a"},
                taints=(models.Taint("dedicated", "gpu", "NoSchedule"),),
            ),
            node("small", cpu=500, labels={"disk": "ssd"}),
            node("hdd", labels={"disk": "hdd"}),
            node("hdd-small", cpu=500, labels={"disk": "hdd"}),
        ]
    )
    state.apply_pod("ADDED", pod("p", cpu=1000, node_selector={"disk": "ssd"}))
    schedule_all(state)

    async def go() -> None:
        async with serving(state) as s:
            resp = await s.stub.Explain(
                scheduler_pb2.ExplainRequest(namespace="ns", name="p", include_nodes=True)
            )
            assert resp.state == scheduler_pb2.WAITING
            assert resp.total_nodes == 4 and resp.feasible_nodes == 0
            verdicts = {v.plugin: v for v in resp.plugins}
            assert {k: v.rejected_nodes for k, v in verdicts.items()} == {
                "TaintToleration": 1,
                "NodeAffinity": 2,
                "NodeResourcesFit": 2,  # hdd-small counts here and under NodeAffinity
            }
            taint = verdicts["TaintToleration"]
            assert [(c.node_class, c.nodes) for c in taint.node_classes] == [
                ("zone=a,taints=dedicated:NoSchedule", 1)
            ]
            assert [(r.reason, r.nodes) for r in verdicts["NodeResourcesFit"].reasons] == [
                ("Insufficient cpu", 2)
            ]
            assert verdicts["NodeResourcesFit"].resolvable_by_preemption
            assert not taint.resolvable_by_preemption
            assert not resp.preemption_might_help  # nothing of lower priority runs anywhere
            per_node = {n.node: {r.plugin for r in n.rejections} for n in resp.nodes}
            assert per_node == {
                "tainted": {"TaintToleration"},
                "small": {"NodeResourcesFit"},
                "hdd": {"NodeAffinity"},
                "hdd-small": {"NodeAffinity", "NodeResourcesFit"},
            }
            # The summary counts each node once, under its first rejecting plugin.
            assert resp.summary.startswith("0/4 nodes are available: ")
            assert "1 Insufficient cpu" in resp.summary
            assert "2 node(s) didn't match Pod's node affinity/selector" in resp.summary

    run(go())


def test_explain_of_a_pod_that_is_not_pending_runs_nothing() -> None:
    state = make_state([node("a")])
    state.apply_pod("ADDED", pod("web", node_name="a"))

    async def go() -> None:
        async with serving(state) as s:
            resp = await s.stub.Explain(scheduler_pb2.ExplainRequest(namespace="ns", name="web"))
            assert resp.state == scheduler_pb2.BOUND
            assert resp.summary == "not pending: bound to node a"
            assert list(resp.plugins) == []

    run(go())


def test_explain_names_the_gang_member_that_blocks_its_group() -> None:
    state = make_state([node("a", cpu=2000)])
    group = models.PodGroupRef("trainers", 2)
    state.apply_pod("ADDED", pod("small", cpu=500, group=group))
    state.apply_pod("ADDED", pod("big", cpu=5000, group=group))
    schedule_all(state)

    async def go() -> None:
        async with serving(state) as s:
            for name in ("small", "big"):
                resp = await s.stub.Explain(scheduler_pb2.ExplainRequest(namespace="ns", name=name))
                assert resp.state == scheduler_pb2.WAITING
                assert resp.blocking_group_member == "ns/big"
            status = await s.stub.GetPod(scheduler_pb2.GetPodRequest(namespace="ns", name="small"))
            assert status.group == "trainers"

    run(go())


# ---- simulate -------------------------------------------------------------------------------

POD_YAML = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}}}
spec:
  containers:
  - name: c
    image: pause
    resources: {{requests: {{cpu: "{cpu}"}}}}
"""


def manifest(name: str, cpu: str = "600m", ns: str = "default") -> str:
    return POD_YAML.format(name=name, cpu=cpu, ns=ns)


def test_simulate_places_in_order_and_explains_with_earlier_pods_counted() -> None:
    state = make_state([node("only", cpu=1000)])
    before = fingerprint(state)

    async def go() -> None:
        async with serving(state) as s:
            resp = await s.stub.Simulate(
                scheduler_pb2.SimulateRequest(manifests=[manifest("a"), manifest("b")])
            )
            a, b = resp.placements
            assert (a.pod.name, a.node, b.pod.name, b.node) == ("a", "only", "b", "")
            assert [n.node for n in a.top_nodes] == ["only"] and a.top_nodes[0].plugin_scores
            assert not resp.all_placed
            assert b.summary == (
                "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
                "preemption: 0/1 nodes are available: 1 No preemption victims found for "
                "incoming pod."
            )
            # b's verdicts see a on the node, as the simulation did.
            assert [(v.plugin, v.rejected_nodes) for v in b.plugins] == [("NodeResourcesFit", 1)]
            # Gang: all or nothing, naming the pod that blocks.
            gang = await s.stub.Simulate(
                scheduler_pb2.SimulateRequest(manifests=[manifest("a"), manifest("b")], gang=True)
            )
            assert [p.node for p in gang.placements] == ["", ""]
            assert gang.blocking_pod.name == "b"
            assert gang.placements[0].summary.startswith(api_views.GANG_NOT_PLACED)

    run(go())
    assert fingerprint(state) == before


def test_simulate_takes_proto_pods_json_lists_and_multi_document_yaml() -> None:
    state = make_state([node("big", cpu=8000), node("small", cpu=2000)])
    as_json = json.dumps(
        {
            "kind": "List",
            "items": [
                {"metadata": {"name": "j0"}, "spec": {"containers": [{"name": "c"}]}},
                {"metadata": {"name": "j1"}, "spec": {"containers": [{"name": "c"}]}},
            ],
        }
    )
    proto_pod = wire.pod_to_proto(pod("proto", cpu=1000))
    proto_pod.scheduler_name = ""  # defaults to the first profile

    async def go() -> None:
        async with serving(state) as s:
            resp = await s.stub.Simulate(
                scheduler_pb2.SimulateRequest(
                    pods=[proto_pod],
                    manifests=[as_json, manifest("y0") + "---\n" + manifest("y1")],
                    top_nodes=5,
                )
            )
            assert [p.pod.name for p in resp.placements] == ["proto", "j0", "j1", "y0", "y1"]
            assert resp.all_placed
            assert resp.placements[0].node == "big"  # least allocated wins
            assert [n.node for n in resp.placements[0].top_nodes] == ["big", "small"]
            assert all(p.node in ("big", "small") for p in resp.placements)
            assert resp.placements[1].pod.namespace == "default"
            assert all(p.pod.uid.startswith("simulate-") for p in resp.placements)

    run(go())


def test_simulate_lists_its_node_first_among_ties_wider_than_top_nodes() -> None:
    # Issue 21: with a 4-way tie and topNodes 2, `node` was a third node, not listed.
    state = make_state([node(name) for name in ("n3", "n1", "n4", "n2")])
    request = scheduler_pb2.SimulateRequest(manifests=[manifest("a")], top_nodes=2)

    async def go() -> list[tuple[str, list[str]]]:
        answers = []
        async with serving(state) as s:
            for seed in range(8):  # the scheduler picks among the ties at random
                state.algo.rng.seed(seed)
                (p,) = (await s.stub.Simulate(request)).placements
                assert len({n.total for n in p.top_nodes}) == 1  # all four tie
                answers.append((p.node, [n.node for n in p.top_nodes]))
        return answers

    answers = run(go())
    for chosen, top in answers:  # the answer first, then the other ties by name
        assert top == [chosen, "n1" if chosen != "n1" else "n2"]
    assert {chosen for chosen, _ in answers} - {"n1", "n3"}  # some pick is not in the first rows


@pytest.mark.parametrize(
    ("request_kwargs", "message"),
    [
        (
            {"manifests": [manifest("x", cpu="abc")]},
            "manifests[0]: pod default/x: spec.containers[0].resources.requests.cpu: "
            "invalid quantity 'abc'",
        ),
        (
            {"manifests": ["metadata: {name: ok}\nspec: {containers: [{name: c}]}", "a: [b"]},
            "manifests[1]: not valid YAML or JSON",
        ),
        (
            {"manifests": ["kind: Service\nmetadata: {name: s}"]},
            "manifests[0]: kind: expected Pod, got 'Service'",
        ),
        (
            {"manifests": [manifest("a") + "---\n" + manifest("b", cpu="-1")]},
            "manifests[0]: document 1: pod default/b: spec.containers[0].resources.requests.cpu",
        ),
        (
            {
                "manifests": [
                    "kind: List\nitems:\n- &p {metadata: {name: a}, spec: {containers: []}}\n- *p\n"
                ]
            },
            "manifests[0]: YAML aliases (*ref) are not supported",
        ),
        (
            {"manifests": [manifest("a").replace("spec:", "spec:\n  schedulerName: other")]},
            "manifests[0]: pod default/a: spec.schedulerName: 'other' is not a profile",
        ),
        ({"manifests": ["x" * (api_input.MAX_MANIFEST_BYTES + 1)]}, "manifests: 4194305 bytes"),
        (
            {
                "manifests": [
                    json.dumps(
                        {
                            "kind": "List",
                            "items": [
                                {"metadata": {"name": f"p{i}"}, "spec": {"containers": []}}
                                for i in range(api_input.MAX_SIMULATE_PODS + 1)
                            ],
                        }
                    )
                ]
            },
            "at most 1000 pods per Simulate call",
        ),
        ({"top_nodes": 51, "manifests": [manifest("a")]}, "top_nodes: must be 0..50"),
        ({}, "pods, manifests: give at least one pod"),
    ],
)
def test_simulate_refuses_bad_input_naming_the_field(
    request_kwargs: dict[str, Any], message: str
) -> None:
    state = make_state([node("a")])
    before = fingerprint(state)

    async def go() -> str:
        async with serving(state) as s:
            return await expect_error(
                s.stub.Simulate(scheduler_pb2.SimulateRequest(**request_kwargs)),
                Code.INVALID_ARGUMENT,
            )

    assert message in run(go())
    assert fingerprint(state) == before


def test_simulate_refuses_negative_quantities_in_proto_pods() -> None:
    state = make_state([node("a")])
    bad = wire.pod_to_proto(pod("neg"))
    bad.containers[0].requests["cpu"] = -5

    async def go() -> str:
        async with serving(state) as s:
            return await expect_error(
                s.stub.Simulate(scheduler_pb2.SimulateRequest(pods=[bad])), Code.INVALID_ARGUMENT
            )

    assert run(go()) == "pods[0]: containers[0].requests['cpu']: must not be negative"


@pytest.mark.parametrize("where", ["scoring", "explaining"])
def test_simulate_leaves_the_view_untouched_when_it_fails_half_way(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = make_state([node("a", cpu=1000), node("b", cpu=1000)])
    state.apply_pod("ADDED", pod("running", cpu=300, node_name="a"))
    before = fingerprint(state)
    calls = {"n": 0}

    def boom_on_second(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("injected failure")
            return original(*args, **kwargs)

        return wrapped

    async def go() -> None:
        async with serving(state) as s:
            if where == "scoring":
                monkeypatch.setattr(
                    state.algo, "scored_nodes", boom_on_second(state.algo.scored_nodes)
                )
                pods = [manifest("a"), manifest("b"), manifest("c")]
            else:
                monkeypatch.setattr(s.api, "explain_pod", boom_on_second(s.api.explain_pod))
                pods = [manifest("a"), manifest("b", cpu="900m"), manifest("c", cpu="900m")]
            msg = await expect_error(
                s.stub.Simulate(scheduler_pb2.SimulateRequest(manifests=pods)), Code.INTERNAL
            )
            assert "injected failure" in msg and "the view was not changed" in msg
            assert fingerprint(state) == before
            monkeypatch.undo()
            ok = await s.stub.Simulate(scheduler_pb2.SimulateRequest(manifests=[manifest("d")]))
            assert ok.placements[0].node == "b"  # a still holds only `running`

    run(go())
    assert calls["n"] >= 2
    assert fingerprint(state) == before


# ---- the decision stream --------------------------------------------------------------------


async def next_decision(call: Any) -> scheduler_pb2.Decision:
    got = await asyncio.wait_for(call.read(), 30)
    assert isinstance(got, scheduler_pb2.Decision), got
    return got


def test_watch_decisions_replays_then_follows_one_namespace() -> None:
    state = make_state([node("a", cpu=10_000)])
    for ns in ("mine", "other"):
        state.apply_pod("ADDED", pod("early", ns=ns))
        state.apply_pod("ADDED", pod("huge", ns=ns, cpu=50_000))
    schedule_all(state)

    async def go() -> None:
        async with serving(state) as s:
            decisions_only = s.stub.WatchDecisions(
                scheduler_pb2.WatchDecisionsRequest(namespace="mine", replay=10)
            )
            everything = s.stub.WatchDecisions(
                scheduler_pb2.WatchDecisionsRequest(
                    namespace="mine", include_outcomes=True, replay=10
                )
            )
            got = [await next_decision(decisions_only), await next_decision(decisions_only)]
            kinds = {(d.pod.name, scheduler_pb2.Decision.Kind.Name(d.kind)) for d in got}
            assert kinds == {("early", "SCHEDULED"), ("huge", "UNSCHEDULABLE")}
            replayed = [await next_decision(everything), await next_decision(everything)]
            assert {d.pod.namespace for d in replayed} == {"mine"}
            # Live: an outcome in "other", then one in "mine".
            for ns in ("other", "mine"):
                decision_id = state.decision_of_pod[f"uid-{ns}-early"]
                state.on_outcome(decision_id=decision_id, result=Outcome.BOUND, binder_id="b-1")
            live = await next_decision(everything)
            assert (live.pod.namespace, live.pod.name, live.kind, live.binder_id) == (
                "mine",
                "early",
                scheduler_pb2.Decision.BOUND,
                "b-1",
            )
            assert live.node == "a" and live.at.seconds > 0
            decisions_only.cancel()
            everything.cancel()
            # Cancelled streams unsubscribe (as soon as the server sees the cancellation).
            for _ in range(100):
                if not state.listeners:
                    break
                await asyncio.sleep(0.05)
            assert state.listeners == []

    run(go())


# ---- the CLI's TLS flags against a TLS server -------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make test certificates")
    d = tmp_path_factory.mktemp("certs")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=splitsched-test-ca", cwd=d)  # fmt: skip
    for who, ext in (
        ("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
        ("client", "extendedKeyUsage=clientAuth"),
    ):
        (d / f"{who}.ext").write_text(ext + "\n")
        _openssl("req", "-new", *ec, "-keyout", f"{who}.key", "-out", f"{who}.csr",
                 "-subj", f"/CN={who}", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-out", f"{who}.crt",
                 "-extfile", f"{who}.ext", cwd=d)  # fmt: skip
    return d


@contextlib.asynccontextmanager
async def tls_server(state: SchedulerState, certs: Path) -> AsyncIterator[str]:
    """The Scheduler API over mutual TLS (the services do not serve TLS yet)."""
    server = grpc.aio.server()
    scheduler_pb2_grpc.add_SchedulerServicer_to_server(
        SchedulerApi(state=state, on_change=lambda: None), server
    )
    creds = grpc.ssl_server_credentials(
        [((certs / "server.key").read_bytes(), (certs / "server.crt").read_bytes())],
        root_certificates=(certs / "ca.crt").read_bytes(),
        require_client_auth=True,
    )
    port = server.add_secure_port("127.0.0.1:0", creds)
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


def test_cli_tls_flags_reach_a_mutual_tls_server(
    certs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = make_state([node("tls-node")])
    ca, cert, key = (str(certs / f) for f in ("ca.crt", "client.crt", "client.key"))

    async def cli_main(argv: list[str]) -> tuple[int, str, str]:
        code = await asyncio.to_thread(cli.main, argv)
        out, err = capsys.readouterr()
        return code, out, err

    async def go() -> None:
        async with tls_server(state, certs) as target:
            base = ["nodes", "--server", target, "--timeout", "10", "-o", "json"]
            code, out, err = await cli_main([*base, "--ca", ca, "--cert", cert, "--key", key])
            assert code == 0, err
            assert [n["name"] for n in json.loads(out)["nodes"]] == ["tls-node"]
            # The name in --server-name must be in the server's certificate.
            code, _, err = await cli_main(
                [*base, "--ca", ca, "--cert", cert, "--key", key, "--server-name", "localhost"]
            )
            assert code == 0, err
            code, _, err = await cli_main(
                [*base, "--ca", ca, "--cert", cert, "--key", key, "--server-name", "evil.test"]
            )
            assert code == 3, err
            # Without a client certificate, or in plaintext, the server refuses.
            code, _, err = await cli_main([*base, "--ca", ca])
            assert code == 3 and "UNAVAILABLE" in err
            code, _, err = await cli_main(base)
            assert code == 3 and "UNAVAILABLE" in err
            # The environment gives the same defaults.
            monkeypatch.setenv("SPLITSCHED_SERVER", target)
            monkeypatch.setenv("SPLITSCHED_CA", ca)
            monkeypatch.setenv("SPLITSCHED_CERT", cert)
            monkeypatch.setenv("SPLITSCHED_KEY", key)
            code, out, err = await cli_main(["nodes"])
            assert code == 0, err
            assert "tls-node" in out
            # Bad TLS flags are bad input.
            monkeypatch.delenv("SPLITSCHED_KEY")
            code, _, err = await cli_main(["nodes"])
            assert code == 2 and "--cert and --key" in err
            monkeypatch.delenv("SPLITSCHED_CERT")
            code, _, err = await cli_main([*base, "--ca", str(certs / "missing.crt")])
            assert code == 2 and "missing.crt" in err

    run(go())
