"""Runs a seed's scenario through kube-scheduler, then through splitsched, and compares.

One control plane for the whole session, with both schedulers started once: each
schedules only pods with its own schedulerName, and the runs take turns, so only one
run's pods exist at a time. Each run creates fresh nodes (``<prefix>-nXX``) and fresh
namespaces, and deletes them at its end.

A run creates the pods one at a time and waits for each outcome (bound, or a
FailedScheduling Event). A pod that did not bind is deleted at once, so a later pod can
never make it schedulable behind the run's back. kube-scheduler's run goes first and is
the reference. In splitsched's run, after each pod the state is set back to the
reference's: a pod bound elsewhere, or bound where kube-scheduler left it pending, is
deleted, and a pod kube-scheduler bound is re-created on kube-scheduler's node (a
``-pin`` copy with spec.nodeName) when splitsched did not put it there. So every pod of
both runs is tried against the same state, and score tie-breaks cannot make the runs
drift apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from bench.agreement import (
    compare,
    deviceops,
    extender,
    known,
    kubeops,
    report,
    scenario,
    sides,
    storageops,
)
from bench.sidebyside import contenders
from splitsched.testing import controlplane, kube

log = logging.getLogger("bench.agreement")

OUTCOME_TIMEOUT = 30.0
#: How long a gated pod must stay untouched before its gates are removed.
GATE_HOLD = 1.0
NODE_TIMEOUT = 60.0
Key = tuple[str, str]


class Session:
    """The control plane, kube-scheduler with its extender, and splitsched's services."""

    def __init__(self, *, workdir: Path | None = None, keep: bool = False) -> None:
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="splitsched-agreement-"))
        self.keep = keep
        self.cp = controlplane.ControlPlane(self.workdir / "cluster", die_with_parent=True)
        self.recorder = extender.Extender()
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Session:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        self.cp.up()
        self._stack.callback(self.cp.down)
        self.api = kube.api_client_from_kubeconfig(self.cp.kubeconfig_path)
        self.recorder.start()
        self._stack.callback(self.recorder.stop)
        kube_scheduler = sides.KubeScheduler(
            kubeconfig=self.cp.kubeconfig_path, workdir=self.workdir, recorder=self.recorder
        )
        kube_scheduler.start()
        self._stack.callback(kube_scheduler.stop)
        ours = contenders.Splitsched(
            "splitsched", binders=1, admin_api=self.api, workdir=self.workdir / "splitsched"
        )
        ours.start()
        self._stack.callback(ours.stop)
        assert ours.stack is not None
        channel = ours.stack.channel()
        self._stack.callback(channel.close)
        self.kube = sides.KubeSide(self.api, kube_scheduler)
        self.ours = sides.SplitschedSide(channel, ours.scheduler_name)
        self.logs = {"kube-scheduler": kube_scheduler.log_tail, "splitsched": ours.log_tail}

    def close(self) -> None:
        self._stack.close()
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_seed(
    session: Session, scene: scenario.Scenario, *, self_check: bool = False
) -> compare.SeedResult:
    """Both runs of one scenario, and the verdict on every pod. ``self_check``: the second
    run is kube-scheduler's again, to find where kube-scheduler disagrees with itself."""
    started = time.monotonic()
    result = compare.SeedResult(seed=scene.seed, nodes=len(scene.nodes), pods=len(scene.pods))
    second = session.kube if self_check else session.ours
    try:
        theirs, their_taints = run(session.api, session.kube, scene, f"ag{scene.seed}-k", None)
        ours, our_taints = run(session.api, second, scene, f"ag{scene.seed}-s", theirs)
        if their_taints != our_taints:
            result.cluster_differs = f"node taints: {their_taints} vs {our_taints}"
        result.verdicts = [known.classify(v) for v in compare.verdicts(theirs, ours)]
    except Exception as exc:
        log.exception("seed %d failed", scene.seed)
        result.error = _error_text(exc)
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _error_text(exc: Exception) -> str:
    """One line: an API error's status and message, not its headers."""
    if isinstance(exc, ApiException):
        try:
            message = json.loads(exc.body or "{}").get("message", "")
        except ValueError:
            message = str(exc.body)[:300]
        return f"API error {exc.status}: {message or exc.reason}"
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def _run_objects(
    api: client.ApiClient, scene: scenario.Scenario, prefix: str
) -> Iterator[dict[str, str]]:
    """The run's nodes and namespaces (slot -> name), deleted on the way out."""
    nodes = [scenario.run_node(n, prefix) for n in scene.nodes]
    names: dict[str, str] = {}
    volumes: list[dict[str, Any]] = []
    dra: list[dict[str, Any]] = []
    try:
        for slot, labels in scene.namespaces.items():
            names[slot] = kube.create_namespace(api, prefix=f"{prefix}-{slot[1:]}", labels=labels)
        # Storage first: the schedulers see it before the nodes are Ready.
        volumes = storageops.create(api, scene.volumes, prefix, names)
        dra = deviceops.create(api, scene.dra, prefix, names)
        kubeops.create_nodes(api, nodes, timeout=NODE_TIMEOUT)
        yield names
    finally:
        try:
            storageops.remove(api, volumes)
        except Exception as exc:  # the run's own error matters more; say this one too
            log.warning("%s: storage not removed: %s", prefix, exc)
        try:
            deviceops.remove(api, dra, list(names.values()))
        except Exception as exc:
            log.warning("%s: devices not removed: %s", prefix, exc)
        for ns in names.values():
            with contextlib.suppress(Exception):
                kube.delete_namespace(api, ns, timeout=60)
        kube.delete_nodes(api, [n["metadata"]["name"] for n in nodes])


def run(
    api: client.ApiClient,
    side: sides.Side,
    scene: scenario.Scenario,
    prefix: str,
    reference: Sequence[compare.PodOutcome] | None,
) -> tuple[list[compare.PodOutcome], dict[str, Any]]:
    """One run: every pod in order; with a ``reference``, realigned to it after each pod.
    Returns the outcomes and the node taints the API showed (local names)."""
    with _run_objects(api, scene, prefix) as namespaces:
        node_names = {scenario.node_name(prefix, n) for n in scene.node_names}
        taints = {
            scenario.local_node(prefix, name) or name: t
            for name, t in sorted(kubeops.node_taints(api, node_names).items())
        }
        placed: dict[Key, str] = {}
        side.wait_synced(node_names, placed)
        outcomes = []
        for i, local in enumerate(scene.pods):
            pod = scenario.run_pod(local, prefix, namespaces, side.scheduler_name)
            target = reference[i].node if reference is not None else None
            outcome = _try_pod(api, side, pod, prefix, placed, reference is not None, target)
            if scene.dra.claims:
                claims = deviceops.allocations(api, prefix, namespaces)
                outcome = dataclasses.replace(outcome, claims=claims)
                if reference is not None:
                    _align_claims(
                        api, side, reference[i].claims, prefix, namespaces, node_names, placed
                    )
            outcomes.append(outcome)
            side.wait_synced(node_names, placed)
        return outcomes, taints


def _align_claims(
    api: client.ApiClient,
    side: sides.Side,
    reference: deviceops.Allocations,
    prefix: str,
    namespaces: dict[str, str],
    node_names: set[str],
    placed: dict[Key, str],
) -> None:
    """Give the run's claims the reference's allocations (``deviceops.align``); when any
    was rewritten, wait until the scheduler has seen it: a pod pinned after the writes
    comes down the same ordered stream, so once the scheduler holds that pod it holds the
    claims too."""
    if not deviceops.align(api, reference, prefix, namespaces):
        return
    node = min(node_names)
    ns = namespaces["@ns0"]
    barrier = kube.make_pod(f"barrier-{len(placed)}", scheduler_name=side.scheduler_name)
    barrier["metadata"]["namespace"] = ns
    barrier["spec"]["nodeName"] = node
    kubeops.create_pod(api, barrier)
    side.wait_synced(node_names, {**placed, (ns, barrier["metadata"]["name"]): node})
    kubeops.delete_pod(api, ns, barrier["metadata"]["name"])


def _try_pod(
    api: client.ApiClient,
    side: sides.Side,
    pod: dict[str, Any],
    prefix: str,
    placed: dict[Key, str],
    realign: bool,
    target: str | None,
) -> compare.PodOutcome:
    """Create one pod, observe its outcome, and leave the state as the reference run left
    it (``target``: the reference's node, local name) when ``realign``."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    # Simulate the pod as it is once its gates are gone: what the scheduler then tries.
    before = side.feasible_before(kubeops.ungated(pod))
    uid = kubeops.create_pod(api, pod)
    gate_kept = None
    if pod["spec"].get("schedulingGates"):
        gate_kept = kubeops.hold_gated(api, ns, name, uid, seconds=GATE_HOLD)
    seen = kubeops.wait_outcome(api, ns, name, uid, timeout=OUTCOME_TIMEOUT)
    feasible = before if before is not None else side.feasible_after(ns, name)
    if feasible is None and seen.node is None and not seen.timed_out:
        feasible = frozenset()  # kube-scheduler calls no extender when no node passes
    node = scenario.local_node(prefix, seen.node)
    realigned = _leave_as_reference(
        api, pod, prefix, placed, seen.node, target if realign else node
    )
    return compare.PodOutcome(
        pod=name,
        node=node,
        # The run's own object names (a DeviceClass the pod names) read as local names.
        message=seen.message.replace(f"{prefix}-", "@") if seen.message else seen.message,
        feasible=frozenset(scenario.local_node(prefix, n) or n for n in feasible)
        if feasible is not None
        else None,
        reporter=seen.reporter,
        timed_out=seen.timed_out,
        realigned=realign and realigned,
        gate_kept=gate_kept,
    )


def _leave_as_reference(
    api: client.ApiClient,
    pod: dict[str, Any],
    prefix: str,
    placed: dict[Key, str],
    bound_to: str | None,
    target: str | None,
) -> bool:
    """Keep the pod where it is if that is ``target`` (local name; None: pending), else
    delete it and, for a target node, put a pinned copy there. True if anything moved."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    node = scenario.local_node(prefix, bound_to)
    if bound_to is not None and node == target:
        placed[(ns, name)] = bound_to
        return False
    kubeops.delete_pod(api, ns, name)
    if target is not None:
        copy = kubeops.pinned(kubeops.ungated(pod), scenario.node_name(prefix, target))
        kubeops.create_pod(api, copy)
        placed[(ns, copy["metadata"]["name"])] = copy["spec"]["nodeName"]
    return node != target


def run_seeds(
    session: Session,
    scenes: Sequence[scenario.Scenario],
    *,
    self_check: bool = False,
    progress: Callable[[str], None] = print,
) -> list[compare.SeedResult]:
    out = []
    for scene in scenes:
        result = run_seed(session, scene, self_check=self_check)
        out.append(result)
        progress(report.seed_line(result))
    return out
