"""Scheduling gates on the real control plane (issue 18): pods created with
`spec.schedulingGates` stay untouched until their gates are removed, then bind.

The same scenario runs against splitsched (watcher, scheduler, three binders) and against
kube-scheduler v1.36 (the oracle, as a peer on the same control plane with its own
schedulerName): while gated no scheduler writes anything (no Event, the PodScheduled
condition stays the API server's False/SchedulingGated, no Binding: for splitsched, no
binder makes a Binding call), removing one of two gates changes nothing, and removing the
last one gets the pod bound. Every check reads the API server's objects; the splitsched
run also reads what its API, CLI and binders say.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from splitsched.testing import controlplane, kube, stack
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

pytestmark = pytest.mark.e2e

QUOTA, IMAGE = "example.com/quota", "example.com/image"
#: How long gated pods are watched for anything written to them (the ungated pod created
#: with them binds well within it, so every scheduler involved had its chance).
QUIET_SECONDS = 4.0


def gated_pods(scheduler_name: str) -> list[dict[str, Any]]:
    """Two gated pods (one with two gates) and one without, which must bind."""
    pods = []
    for name, gates in (("held-0", [QUOTA]), ("held-1", [QUOTA, IMAGE]), ("free", [])):
        pod = kube.make_pod(name, scheduler_name=scheduler_name, cpu="200m")
        if gates:
            pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
        pods.append(pod)
    return pods


def pod_json(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any]:
    raw = core.read_namespaced_pod(name, namespace, _preload_content=False)
    doc: dict[str, Any] = json.loads(raw.data)
    return doc


def scheduled_condition(pod: dict[str, Any]) -> tuple[str, str]:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            return str(cond.get("status")), str(cond.get("reason", ""))
    return "", ""


def events_of(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    evs = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    return [f"{e.reason}: {e.message}" for e in evs.items]


def assert_untouched(core: client.CoreV1Api, namespace: str, names: list[str]) -> None:
    """What the API server wrote at creation, and nothing from any scheduler."""
    for name in names:
        pod = pod_json(core, namespace, name)
        assert not pod["spec"].get("nodeName"), name
        assert scheduled_condition(pod) == ("False", "SchedulingGated"), name
        assert not pod["status"].get("nominatedNodeName"), name
        assert events_of(core, namespace, name) == [], name


def remove_gate(core: client.CoreV1Api, namespace: str, name: str, gate: str) -> None:
    pod = pod_json(core, namespace, name)
    names = [g["name"] for g in pod["spec"]["schedulingGates"]]
    patch = [
        {"op": "test", "path": f"/spec/schedulingGates/{names.index(gate)}/name", "value": gate},
        {"op": "remove", "path": f"/spec/schedulingGates/{names.index(gate)}"},
    ]
    core.patch_namespaced_pod(name, namespace, patch)


def wait_bound(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any]:
    def bound() -> dict[str, Any] | None:
        pod = pod_json(core, namespace, name)
        return pod if pod["spec"].get("nodeName") else None

    result: dict[str, Any] = kube.wait_for(
        bound, timeout=60, interval=0.5, message=f"{namespace}/{name} bound"
    )
    return result


def gate_scenario(
    core: client.CoreV1Api, namespace: str, scheduler_name: str, *, while_gated: Any = None
) -> None:
    """Create, watch the gated pods stay untouched, ungate step by step, see them bind.
    `while_gated(namespace)` adds the scheduler's own checks while they are gated."""
    kube.create_pods(core.api_client, namespace=namespace, pods=gated_pods(scheduler_name))
    wait_bound(core, namespace, "free")
    time.sleep(QUIET_SECONDS)
    assert_untouched(core, namespace, ["held-0", "held-1"])
    if while_gated is not None:
        while_gated(namespace)

    remove_gate(core, namespace, "held-1", QUOTA)  # one gate left: still untouched
    time.sleep(QUIET_SECONDS / 2)
    assert_untouched(core, namespace, ["held-1"])

    remove_gate(core, namespace, "held-0", QUOTA)
    remove_gate(core, namespace, "held-1", IMAGE)
    for name in ("held-0", "held-1"):
        pod = wait_bound(core, namespace, name)
        assert scheduled_condition(pod)[0] == "True", name
    for name in ("held-0", "held-1"):
        events = kube.wait_for(
            functools.partial(scheduled_events, core, namespace, name),
            timeout=30,
            interval=0.5,
            message=f"{name}'s Scheduled event",
        )
        assert len(events) == 1, events


def scheduled_events(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    return [e for e in events_of(core, namespace, name) if e.startswith("Scheduled")]


def binding_calls(running_stack: stack.Stack) -> dict[str, float]:
    """Every binder's Binding API calls by HTTP status, summed."""
    calls: dict[str, float] = {}
    for svc in running_stack.binder_services:
        for family in text_string_to_metric_families(svc.metrics()):
            for sample in family.samples:
                if sample.name == "splitsched_binder_binding_attempts_total":
                    code = sample.labels["code"]
                    calls[code] = calls.get(code, 0.0) + sample.value
    return calls


def cli(running_stack: stack.Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITSCHED_")}
    env.update({"SPLITSCHED_SERVER": running_stack.scheduler.grpc_target, "NO_COLOR": "1"})
    env.update(running_stack.cli_env())
    return subprocess.run(
        [sys.executable, "-m", "splitsched.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(controlplane.REPO_ROOT),
        timeout=60,
    )


def splitsched_says_gated(running_stack: stack.Stack, namespace: str) -> None:
    """The API and the CLI show both pods GATED with their gates; the binders made one
    Binding call (the ungated pod's) and were never refused."""
    assert binding_calls(running_stack) == {"201": 1.0}
    with running_stack.channel() as channel:
        api = scheduler_pb2_grpc.SchedulerStub(channel)
        listed = api.ListPods(
            scheduler_pb2.ListPodsRequest(state=scheduler_pb2.GATED, namespace=namespace),
            timeout=10,
        )
    by_name = {p.pod.name: p for p in listed.pods}
    assert sorted(by_name) == ["held-0", "held-1"]
    assert by_name["held-1"].message == f"waiting for its scheduling gates: {QUOTA}, {IMAGE}"
    for status in by_name.values():
        assert (status.scheduling_attempts, status.bind_attempts, status.queue) == (0, 0, "gated")
    out = cli(running_stack, "pods", "--state", "gated", "-n", namespace)
    assert out.returncode == 0, out.stderr
    rows = [line.split()[:3] for line in out.stdout.splitlines()[1:]]
    assert rows == [[f"{namespace}/held-0", "GATED", "-"], [f"{namespace}/held-1", "GATED", "-"]]
    out = cli(running_stack, "explain", f"{namespace}/held-0")
    assert out.returncode == 1, out.stderr
    assert out.stdout.splitlines() == [
        f"pod {namespace}/held-0: GATED",
        f"  waiting for its scheduling gates: {QUOTA}",
    ]


def test_splitsched_leaves_gated_pods_alone_until_their_gates_are_removed(
    kube_api: client.ApiClient, namespace: str, running_stack: stack.Stack
) -> None:
    core = client.CoreV1Api(kube_api)
    before = binding_calls(running_stack)
    assert before in ({}, {"201": 0.0})  # this module's stack has bound nothing yet
    gate_scenario(
        core,
        namespace,
        kube.DEFAULT_SCHEDULER_NAME,
        while_gated=lambda ns: splitsched_says_gated(running_stack, ns),
    )
    # Three pods, three Binding calls, every one accepted: never a refused gated Binding.
    assert binding_calls(running_stack) == {"201": 3.0}


def test_kube_scheduler_does_the_same(
    kube_api: client.ApiClient, namespace: str, kube_scheduler: str
) -> None:
    gate_scenario(client.CoreV1Api(kube_api), namespace, kube_scheduler)
