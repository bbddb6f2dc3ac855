"""The mixed fault runs' checks (``splitsched.testing.mixedload`` and the gang and
Scheduled-event additions to ``splitsched.testing.invariants``) on hand-built states: each
promise is shown broken once, so a run that passes them has really been checked."""

from __future__ import annotations

import dataclasses
from typing import Any

from splitsched.core import batch, models, profiles
from splitsched.testing import invariants, mixedload

GI = 1024**3


def node(name: str, cpu: int = 1000) -> models.Node:
    return models.Node(
        name=name, allocatable={models.CPU: cpu, models.MEMORY: 4 * GI, models.PODS: 10}
    )


def pod(
    name: str,
    *,
    cpu: int = 500,
    node_name: str = "",
    group: tuple[str, int] | None = None,
    priority: int = 0,
    policy: str = "PreemptLowerPriority",
    labels: dict[str, str] | None = None,
) -> models.Pod:
    return models.Pod(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        scheduler_name="splitsched",
        node_name=node_name,
        containers=(models.Container("c", {models.CPU: cpu}),),
        group=models.PodGroupRef(*group) if group else None,
        priority=priority,
        preemption_policy=policy,
        labels=labels or {},
    )


def unschedulable(p: models.Pod) -> dict[str, Any]:
    """The API object of a pending pod with the binder's PodScheduled=False condition."""
    return {
        "metadata": {"uid": p.uid, "name": p.name},
        "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]},
    }


def lost(
    nodes: list[models.Node],
    bound: list[models.Pod],
    pending: list[models.Pod],
    *,
    pdbs: list[models.PodDisruptionBudget] = (),  # type: ignore[assignment]
) -> list[str]:
    algo = batch.build(nodes=nodes, bound_pods=bound, profiles=profiles.load_profiles(None))
    for pdb in pdbs:
        algo.cache.set_pdb(pdb)
    return mixedload.lost_pods(pending=pending, bound=bound, algo=algo)


def test_partial_gangs_flags_a_gang_bound_below_min_member() -> None:
    members = [pod(f"g{i}", group=("g", 3), node_name="n1" if i < 2 else "") for i in range(3)]
    assert invariants.partial_gangs(members) == ["gang ns/g: 2 bound < minMember 3"]
    whole = [pod(f"w{i}", group=("w", 3), node_name="n1") for i in range(3)]
    none = [pod(f"z{i}", group=("z", 3)) for i in range(3)]
    assert invariants.partial_gangs(whole + none) == []


def test_scheduled_more_than_once_counts_by_uid() -> None:
    def event(uid: str, reason: str = "Scheduled") -> dict[str, Any]:
        return {"reason": reason, "regarding": {"uid": uid, "namespace": "ns", "name": uid}}

    events = [event("a"), event("a"), event("b"), event("b", "Preempted"), event("c")]
    assert invariants.scheduled_more_than_once(events) == ["ns/a (a): 2 Scheduled events"]


def test_a_pending_pod_that_fits_is_lost() -> None:
    nodes = [node("n1")]
    assert lost(nodes, [], [pod("fits")]) == ["ns/fits: pending but fits on n1"]
    too_big = pod("big", cpu=2000)
    assert lost(nodes, [], [too_big]) == []
    # A pod no profile schedules cannot be rechecked: that is reported, never passed.
    stranger = dataclasses.replace(too_big, scheduler_name="other")
    assert lost(nodes, [], [stranger]) == ["ns/big: no profile 'other' to recheck it with"]


def test_a_pending_pod_that_could_preempt_is_lost_unless_never_or_pdb_guarded() -> None:
    nodes = [node("n1")]
    victim = pod("low", cpu=1000, node_name="n1", priority=1, labels={"guard": "yes"})
    high = pod("high", priority=100)
    assert lost(nodes, [victim], [high]) == ["ns/high: pending but fits on n1 by preempting ns/low"]
    polite = pod("polite", priority=100, policy="Never")
    assert lost(nodes, [victim], [polite]) == []
    guard = models.PodDisruptionBudget(
        namespace="ns",
        name="guard",
        selector=models.LabelSelector(match_labels=(("guard", "yes"),)),
        disruptions_allowed=0,
    )
    assert lost(nodes, [victim], [high], pdbs=[guard]) == []


def test_gangs_are_rechecked_as_a_whole() -> None:
    nodes = [node("n1"), node("n2")]
    fits = [pod(f"f{i}", group=("f", 2)) for i in range(2)]
    assert lost(nodes, [], fits) == ["gang ns/f: 2 pending but fits as a whole (2 members)"]
    too_many = [pod(f"t{i}", cpu=800, group=("t", 3)) for i in range(3)]
    short = [pod(f"s{i}", group=("s", 3)) for i in range(2)]
    assert lost(nodes, [], too_many + short) == []
    # A gang already standing: a straggler is a single pod and must be placed.
    standing = [pod(f"b{i}", cpu=100, group=("b", 2), node_name="n1") for i in range(2)]
    straggler = pod("b2", cpu=100, group=("b", 2))
    (found,) = lost(nodes, standing, [straggler])
    assert found.startswith("ns/b2: pending member of a bound gang, but fits on n")


def manifest(name: str, role: str, *, guarded: bool = False) -> dict[str, Any]:
    labels = {mixedload.ROLE_LABEL: role}
    if guarded:
        labels[mixedload.GUARD_LABEL] = "yes"
    return {"metadata": {"name": name, "labels": labels}}


def preempted(victim: str, by: str) -> dict[str, Any]:
    return {"reason": "Preempted", "regarding": {"name": victim}, "related": {"name": by}}


def test_wrongful_evictions() -> None:
    created = {
        "filler-0": manifest("filler-0", "filler"),
        "filler-1": manifest("filler-1", "filler", guarded=True),
        "mid-0": manifest("mid-0", "mid"),
        "high-0": manifest("high-0", "high"),
        "polite-0": manifest("polite-0", "polite"),
        "gang0-0": manifest("gang0-0", "gang"),
    }
    fine = mixedload.wrongful_evictions(
        created=created,
        evicted=["filler-0", "mid-0"],
        events=[preempted("filler-0", "mid-0"), preempted("mid-0", "high-0")],
    )
    assert fine == []
    wrong = mixedload.wrongful_evictions(
        created=created,
        evicted=["filler-1", "gang0-0"],
        events=[preempted("filler-0", "polite-0"), preempted("high-0", "mid-0")],
    )
    assert len(wrong) == 4, wrong
    assert any("PDB-guarded" in w for w in wrong)
    assert any("gang pod is gone" in w for w in wrong)
    assert any("preemptionPolicy is Never" in w for w in wrong)
    assert any("high-0 (1000) preempted by mid-0 (500)" in w for w in wrong)


def test_a_pending_pod_without_a_failed_scheduling_record_is_unrecorded() -> None:
    quiet, condition, event = pod("quiet"), pod("condition"), pod("event")
    raw = {p.uid: {"metadata": {"uid": p.uid}, "status": {}} for p in (quiet, event)}
    raw[condition.uid] = unschedulable(condition)
    events = [{"reason": "FailedScheduling", "regarding": {"uid": event.uid}}]
    found = mixedload.unrecorded([quiet, condition, event], raw=raw, events=events)
    assert found == ["ns/quiet: pending without a FailedScheduling event or condition"]
    report = mixedload.Report(pods=3, bound=0, pending=[], evicted=[], unrecorded=found)
    assert report.failures() == [f"unrecorded (1): {found[0]}"]
    assert report.failures(allow_unrecorded=True) == []
