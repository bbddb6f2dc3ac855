"""A mixed workload with preemption and gangs in it, and the checks that go with it.

Used by the fault tier's mixed runs (``tests/faults/test_mixed_faults.py``): the fault and
invariant checks of issue 9 must still hold when pods preempt each other and gangs are
placed all or nothing. The workload runs on two pools of kwok nodes:

* ``full``: filled to exactly its allocatable by low-priority *fillers* (some of them
  guarded by a PodDisruptionBudget that allows no disruption), then sent high- and
  mid-priority pods that fit only by preempting fillers, and *polite* pods of high priority
  with ``preemptionPolicy: Never`` that therefore fit nowhere;
* ``free``: gangs that fit as a whole, one gang that cannot fit as a whole (more members
  than nodes, each member nearly a node), one gang with fewer members than its
  minMember, and plain pods.

The checks (``check``) read only the API server's objects: no node over allocatable,
placements meet their constraints, no gang partly bound, no pod lost (every pending pod
has a FailedScheduling record and the core, run on the final state, confirms it fits
nowhere, not even by preempting without breaking a PDB), evictions only of lower-priority,
unguarded pods by pods allowed to preempt, and at most one Scheduled event per pod uid.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from splitsched.core import algorithm, batch, convert, models, profiles
from splitsched.core.plugins import default_preemption
from splitsched.testing import invariants, kube

Json = dict[str, Any]

#: PriorityClass values and policies by role (names get a per-run suffix).
PRIORITIES: Mapping[str, tuple[int, str]] = {
    "low": (100, "PreemptLowerPriority"),
    "mid": (500, "PreemptLowerPriority"),
    "high": (1000, "PreemptLowerPriority"),
    "polite": (1000, "Never"),
}
ROLE_LABEL = "mixed-role"
GUARD_LABEL = "mixed-guard"
GUARD_PDB = "guarded-fillers"
#: Pod role -> its PriorityClass's (value, preemptionPolicy); roles without a class: 0.
PRIORITIES_BY_ROLE: Mapping[str, tuple[int, str]] = {
    "filler": PRIORITIES["low"],
    **{role: PRIORITIES[role] for role in ("mid", "high", "polite")},
    "gang": (0, "PreemptLowerPriority"),
    "plain": (0, "PreemptLowerPriority"),
}


@dataclass(frozen=True)
class Plan:
    """Sizes of the workload. The defaults make 337 pods on 20 nodes of 4 CPUs."""

    full_nodes: int = 12
    free_nodes: int = 8
    node_cpu_milli: int = 4000
    filler_cpu: int = 500  # fillers fill the full pool exactly
    guard_every: int = 4  # every 4th filler is PDB-guarded
    high: int = 16
    high_cpu: int = 1000
    mid: int = 8
    mid_cpu: int = 500
    polite: int = 6
    polite_cpu: int = 1000
    gangs: int = 6
    gang_size: int = 8
    gang_cpu: int = 250
    big_gang: int = 10  # > free_nodes members of big_gang_cpu each: never fits as a whole
    big_gang_cpu: int = 3500
    short_gang: int = 3  # members created, one fewer than its minMember
    plain: int = 150
    plain_cpu: int = 100

    @property
    def fillers(self) -> int:
        return self.full_nodes * self.node_cpu_milli // self.filler_cpu

    @property
    def never_bound(self) -> int:
        """Pods the workload means to stay pending: polite, the big gang, the short gang."""
        return self.polite + self.big_gang + self.short_gang

    @property
    def total(self) -> int:
        gangs = self.gangs * self.gang_size + self.big_gang + self.short_gang
        return self.fillers + self.high + self.mid + self.polite + gangs + self.plain


@dataclass(frozen=True)
class Pool:
    """The two node pools of one mixed run."""

    label: str
    full: list[str]
    free: list[str]

    def selector(self, pool: str) -> dict[str, str]:
        return {"mixed": self.label, "mixed-pool": pool}

    @property
    def nodes(self) -> list[str]:
        return self.full + self.free


def create_pool(api: client.ApiClient, plan: Plan) -> Pool:
    label = uuid.uuid4().hex[:6]
    made = {}
    for pool, count in (("full", plan.full_nodes), ("free", plan.free_nodes)):
        made[pool] = kube.create_kwok_nodes(
            api,
            count,
            name_prefix=f"mixed-{label}-{pool}",
            cpu=f"{plan.node_cpu_milli}m",
            memory="16Gi",
            pods=110,
            labels={"mixed": label, "mixed-pool": pool},
            workers=10,
        )
    return Pool(label, made["full"], made["free"])


def create_priority_classes(api: client.ApiClient) -> dict[str, str]:
    """One PriorityClass per role; returns role -> class name."""
    return kube.create_priority_classes(api, PRIORITIES, prefix="mixed")


def delete_priority_classes(api: client.ApiClient, names: Mapping[str, str]) -> None:
    kube.delete_priority_classes(api, names)


def create_guard_pdb(api: client.ApiClient, namespace: str) -> None:
    """A PDB over the guarded fillers that allows no disruption."""
    kube.create_pdb(
        api,
        namespace=namespace,
        name=GUARD_PDB,
        spec={"maxUnavailable": 0, "selector": {"matchLabels": {GUARD_LABEL: "yes"}}},
    )


def _pod(name: str, role: str, *, cpu: int, pool: Pool, where: str, **kw: Any) -> Json:
    labels = {ROLE_LABEL: role, **kw.pop("labels", {})}
    return kube.make_pod(
        name,
        cpu=f"{cpu}m",
        memory="32Mi",
        labels=labels,
        node_selector=pool.selector(where),
        **kw,
    )


def _gang(prefix: str, size: int, min_member: int, *, cpu: int, pool: Pool) -> list[Json]:
    pods = []
    for i in range(size):
        pod = _pod(f"{prefix}-{i}", "gang", cpu=cpu, pool=pool, where="free")
        pod["metadata"]["annotations"] = {
            convert.GROUP_ANNOTATION: prefix,
            convert.MIN_MEMBER_ANNOTATION: str(min_member),
        }
        pods.append(pod)
    return pods


def fillers(plan: Plan, pool: Pool, classes: Mapping[str, str]) -> list[Json]:
    """Low-priority pods that fill the full pool to exactly its allocatable."""
    return [
        _pod(
            f"filler-{i}",
            "filler",
            cpu=plan.filler_cpu,
            pool=pool,
            where="full",
            priority_class_name=classes["low"],
            labels={GUARD_LABEL: "yes"} if i % plan.guard_every == 0 else {},
        )
        for i in range(plan.fillers)
    ]


def contenders(plan: Plan, pool: Pool, classes: Mapping[str, str], *, seed: int = 7) -> list[Json]:
    """Everything sent once the fillers are bound, in a shuffled order (gang members
    together or apart as the shuffle puts them)."""
    pods: list[Json] = []
    for role, count, cpu in (
        ("high", plan.high, plan.high_cpu),
        ("mid", plan.mid, plan.mid_cpu),
        ("polite", plan.polite, plan.polite_cpu),
    ):
        pods += [
            _pod(
                f"{role}-{i}",
                role,
                cpu=cpu,
                pool=pool,
                where="full",
                priority_class_name=classes[role],
            )
            for i in range(count)
        ]
    for g in range(plan.gangs):
        pods += _gang(f"gang{g}", plan.gang_size, plan.gang_size, cpu=plan.gang_cpu, pool=pool)
    pods += _gang("biggang", plan.big_gang, plan.big_gang, cpu=plan.big_gang_cpu, pool=pool)
    pods += _gang("shortgang", plan.short_gang, plan.short_gang + 1, cpu=100, pool=pool)
    pods += [
        _pod(f"plain-{i}", "plain", cpu=plan.plain_cpu, pool=pool, where="free")
        for i in range(plan.plain)
    ]
    random.Random(seed).shuffle(pods)
    return pods


# -- the checks ---------------------------------------------------------------------------


@dataclass
class Report:
    """What the API server shows after a mixed run. Every list is a list of violations
    (empty: the promise held) except ``evicted`` and ``pending``."""

    pods: int
    bound: int
    pending: list[str]
    evicted: list[str]
    lost: list[str] = field(default_factory=list)
    overcommitted: list[str] = field(default_factory=list)
    placement: list[str] = field(default_factory=list)
    partial_gangs: list[str] = field(default_factory=list)
    wrongful_evictions: list[str] = field(default_factory=list)
    scheduled_twice: list[str] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)

    def failures(self, *, allow_unrecorded: bool = False) -> list[str]:
        """One line per broken promise. ``allow_unrecorded``: pending pods without a
        FailedScheduling record are not a failure (faults injected into those very writes,
        which the binder tries a bounded number of times)."""
        out = []
        names = () if allow_unrecorded else ("unrecorded",)
        for name in (
            *names,
            "lost",
            "overcommitted",
            "placement",
            "partial_gangs",
            "wrongful_evictions",
            "scheduled_twice",
        ):
            items: list[str] = getattr(self, name)
            if items:
                out.append(f"{name} ({len(items)}): " + "; ".join(items[:10]))
        return out


def _events(api: client.ApiClient, namespace: str) -> list[Json]:
    return invariants.list_json(api, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")


def _pdbs(api: client.ApiClient, namespace: str) -> list[models.PodDisruptionBudget]:
    out = []
    for obj in invariants.list_json(
        api, f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    ):
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        out.append(
            models.PodDisruptionBudget(
                namespace=namespace,
                name=obj["metadata"]["name"],
                selector=models.LabelSelector(
                    match_labels=tuple(sorted(spec["selector"]["matchLabels"].items()))
                ),
                disruptions_allowed=int(status.get("disruptionsAllowed", 0)),
            )
        )
    return out


def _failed_scheduling(pod: Json, events: Sequence[Json]) -> bool:
    """The pod carries PodScheduled=False (Unschedulable) or a FailedScheduling event."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return True
    uid = pod["metadata"]["uid"]
    return any(
        e.get("reason") == "FailedScheduling" and (e.get("regarding") or {}).get("uid") == uid
        for e in events
    )


def _placeable(algo: algorithm.FrameworkAlgorithm, pods: Sequence[models.Pod]) -> str | None:
    """Where the core would put ``pods`` (one pod, or a gang's pending members) on the
    final state, or None if nowhere; leaves the cache as it was."""
    if len(pods) > 1:
        placed, blocking, _ = algo.place_gang(pods)
        for pod, _node in placed:
            algo.forget(pod.uid)
        return None if blocking is not None else f"fits as a whole ({len(placed)} members)"
    if algo.profile_for(pods[0]) is None:
        return f"no profile {pods[0].scheduler_name!r} to recheck it with"
    result = algo.schedule(pods[0])
    if result.bind is not None:
        return f"fits on {result.bind.node}"
    if result.preempt is not None:
        pdbs = list(algo.table.pdbs.values())
        violating, _ = default_preemption.split_by_pdb(list(result.preempt.victims), pdbs)
        if not violating:
            victims = ", ".join(v.key for v in result.preempt.victims)
            return f"fits on {result.preempt.node} by preempting {victims}"
    return None


def _but(where: str) -> str:
    return where if where.startswith("no profile") else f"pending but {where}"


def unrecorded(
    pending: Sequence[models.Pod], *, raw: Mapping[str, Json], events: Sequence[Json]
) -> list[str]:
    """Pending pods that carry no FailedScheduling record: a user cannot tell why."""
    return [
        f"{pod.key}: pending without a FailedScheduling event or condition"
        for pod in pending
        if not _failed_scheduling(raw[pod.uid], events)
    ]


def lost_pods(
    *,
    pending: Sequence[models.Pod],
    bound: Sequence[models.Pod],
    algo: algorithm.FrameworkAlgorithm,
) -> list[str]:
    """Pending pods that are not honestly unschedulable: the core places them (a gang: its
    pending members as a whole, once enough are pending) on the final state."""
    out: list[str] = []
    groups: dict[tuple[str, str], list[models.Pod]] = defaultdict(list)
    for pod in pending:
        if pod.group is not None and pod.group.min_member > 1:
            groups[(pod.namespace, pod.group.name)].append(pod)
        elif (where := _placeable(algo, [pod])) is not None:
            out.append(f"{pod.key}: {_but(where)}")
    bound_in: Counter[tuple[str, str]] = Counter(
        (p.namespace, p.group.name) for p in bound if p.group is not None
    )
    for key, members in groups.items():
        need = members[0].group.min_member  # type: ignore[union-attr]
        if bound_in[key] >= need:
            # The gang already stands: its stragglers are single pods now.
            out += [
                f"{m.key}: pending member of a bound gang, but {w}"
                for m in members
                if (w := _placeable(algo, [m])) is not None
            ]
        elif len(members) >= need and (where := _placeable(algo, members)) is not None:
            out.append(f"gang {key[0]}/{key[1]}: {len(members)} pending but {where}")
    return out


def _role(manifest: Json | None) -> str:
    return str(((manifest or {}).get("metadata") or {}).get("labels", {}).get(ROLE_LABEL, ""))


def wrongful_evictions(
    *, created: Mapping[str, Json], evicted: Sequence[str], events: Sequence[Json]
) -> list[str]:
    """Only unguarded pods of a lower priority than some pod allowed to preempt may go
    (fillers, and mid pods under high ones); every Preempted event must name a preemptor
    allowed to preempt, of a higher priority than its victim."""
    out = []
    for name in evicted:
        labels = created[name]["metadata"].get("labels") or {}
        if labels.get(GUARD_LABEL) == "yes":
            out.append(f"{name}: PDB-guarded pod evicted although unguarded fillers remained")
        if _role(created[name]) not in ("filler", "mid"):
            out.append(f"{name}: a {_role(created[name])} pod is gone (only fillers/mid may go)")
    for e in events:
        if e.get("reason") != "Preempted":
            continue
        victim = (e.get("regarding") or {}).get("name", "")
        preemptor = (e.get("related") or {}).get("name", "")
        v_role, p_role = _role(created.get(victim)), _role(created.get(preemptor))
        if v_role not in PRIORITIES_BY_ROLE or p_role not in PRIORITIES_BY_ROLE:
            out.append(f"{victim} ({v_role or '?'}): Preempted by {preemptor} ({p_role or '?'})")
            continue
        (v_prio, _), (p_prio, p_policy) = PRIORITIES_BY_ROLE[v_role], PRIORITIES_BY_ROLE[p_role]
        if p_policy == "Never":
            out.append(f"{victim}: preempted by {preemptor} whose preemptionPolicy is Never")
        if p_prio <= v_prio:
            out.append(f"{victim} ({v_prio}) preempted by {preemptor} ({p_prio}): not lower")
    return out


def check(
    api: client.ApiClient,
    *,
    namespace: str,
    pool: Pool,
    created: Mapping[str, Json],
    profiles_yaml: str,
) -> Report:
    """Every promise of a mixed run, from the API server's objects (see the module
    docstring); ``created``: name -> manifest of every pod the run created."""
    nodes, all_pods = invariants.cluster_state(api)
    raw_list = invariants.list_json(api, f"/api/v1/namespaces/{namespace}/pods")
    raw = {o["metadata"]["uid"]: o for o in raw_list}
    ours = [p for p in all_pods if p.namespace == namespace and p.uid in raw]
    names = set(pool.nodes)
    pool_nodes = [n for n in nodes if n.name in names]
    on_pool = [p for p in all_pods if p.node_name in names]
    bound = [p for p in ours if p.node_name]
    pending = [p for p in ours if not p.node_name and not p.is_terminal]
    present = {p.name for p in ours}
    events = _events(api, namespace)
    report = Report(
        pods=len(created),
        bound=len(bound),
        pending=sorted(p.key for p in pending),
        evicted=sorted(n for n in created if n not in present),
    )
    report.overcommitted = invariants.overcommitted(pool_nodes, on_pool)
    report.placement = invariants.placement_violations(pool_nodes, ours)
    report.partial_gangs = invariants.partial_gangs(ours)
    report.scheduled_twice = invariants.scheduled_more_than_once(events)
    strays = sorted(p.name for p in ours if p.name not in created)
    if strays:
        report.lost.append(f"pods the run did not create: {strays[:10]}")
    # The core on the final state: the pool's nodes, every pod bound on them, the PDBs.
    profs = profiles.load_profiles_yaml(profiles_yaml)
    live = [p for p in on_pool if not p.is_terminal]
    algo = batch.build(nodes=pool_nodes, bound_pods=live, profiles=profs, seed=0)
    for pdb in _pdbs(api, namespace):
        algo.cache.set_pdb(pdb)
    report.lost += lost_pods(pending=pending, bound=bound, algo=algo)
    report.unrecorded = unrecorded(pending, raw=raw, events=events)
    report.wrongful_evictions = wrongful_evictions(
        created=created, evicted=report.evicted, events=events
    )
    return report


def pending_names(api: client.ApiClient, namespace: str) -> Iterator[str]:
    for o in invariants.list_json(api, f"/api/v1/namespaces/{namespace}/pods"):
        if not (o.get("spec") or {}).get("nodeName"):
            yield o["metadata"]["name"]


def wait_settled(
    api: client.ApiClient,
    namespace: str,
    plan: Plan,
    *,
    timeout: float = 180.0,
    settled_for: float = 3.0,
) -> bool:
    """Wait until only the pods meant to stay pending are pending, for ``settled_for``
    seconds (``check`` then says whether the ones left are honestly unschedulable);
    False if that never happened within ``timeout``."""
    deadline = time.monotonic() + timeout
    since: float | None = None
    while time.monotonic() < deadline:
        pending = sum(1 for _ in pending_names(api, namespace))
        if pending <= plan.never_bound:
            since = since or time.monotonic()
            if time.monotonic() - since >= settled_for:
                return True
        else:
            since = None
        time.sleep(0.5)
    return False


def wait_recorded(api: client.ApiClient, namespace: str, *, timeout: float = 90.0) -> bool:
    """Wait until every pending pod carries its FailedScheduling record: the binders write
    them in the background, tried again while the API server fails or throttles them, so
    a record may land after the pods settled. False if some still lack one at ``timeout``
    (``check`` then names them)."""
    deadline = time.monotonic() + timeout
    while True:
        pods = invariants.list_json(api, f"/api/v1/namespaces/{namespace}/pods")
        pending = [
            o
            for o in pods
            if not (o.get("spec") or {}).get("nodeName")
            and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        events = _events(api, namespace) if pending else []
        if all(_failed_scheduling(o, events) for o in pending):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(1.0)
