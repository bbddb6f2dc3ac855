"""DefaultPreemption: when a pod fits nowhere, find the node where evicting the fewest,
least important lower-priority pods makes it fit (kube-scheduler's PostFilter).

For each candidate node (rejected by a filter that freeing room could satisfy), remove
every lower-priority pod, check the pod fits, then give back as many of them as possible,
most important first and PodDisruptionBudget-protected ones before the rest; what cannot
be given back are the victims. The node is then chosen by kube-scheduler's criteria in
order: fewest PDB violations, lowest highest-victim priority, smallest sum of victim
priorities, fewest victims, latest start of the highest-priority victims, first node.
The table is restored exactly after every what-if.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable

#: kube-scheduler's DefaultPreemptionArgs defaults.
DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100


@dataclass(frozen=True, slots=True)
class Candidate:
    row: int
    victims: tuple[models.Pod, ...]
    pdb_violations: int

    def rank(self) -> tuple[int, int, int, int, float, int]:
        """Smaller is better, criterion by criterion."""
        top = max(v.priority for v in self.victims) if self.victims else -(2**31)
        top_started = [v.creation_timestamp for v in self.victims if v.priority == top]
        earliest_of_top = min(top_started) if top_started else 0.0
        return (
            self.pdb_violations,
            top,
            sum(v.priority for v in self.victims),
            len(self.victims),
            -earliest_of_top,  # later start of the most important victims is better
            self.row,
        )


def more_important_first(pod: models.Pod) -> tuple[int, float, str]:
    """kube-scheduler's MoreImportantPod: higher priority, then earlier start."""
    return (-pod.priority, pod.creation_timestamp, pod.uid)


def split_by_pdb(
    pods: Sequence[models.Pod], pdbs: Sequence[models.PodDisruptionBudget]
) -> tuple[list[models.Pod], list[models.Pod]]:
    """(violating, not violating), spending each PDB's allowed disruptions in order, as
    kube-scheduler's filterPodsWithPDBViolation does."""
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[models.Pod] = []
    fine: list[models.Pod] = []
    for pod in pods:
        hit = False
        for i, pdb in enumerate(pdbs):
            if pdb.protects(pod):
                allowed[i] -= 1
                if allowed[i] < 0:
                    hit = True
        (violating if hit else fine).append(pod)
    return violating, fine


class DefaultPreemption:
    name: ClassVar[str] = "DefaultPreemption"

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        """DefaultPreemptionArgs: how many candidate nodes to find before choosing
        (`candidate_count`), checked as kube-scheduler checks them."""
        args = args or {}
        pct = args.get("minCandidateNodesPercentage", DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE)
        absolute = args.get("minCandidateNodesAbsolute", DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE)
        if not isinstance(pct, int) or not 0 <= pct <= 100:
            raise ValueError(
                f"minCandidateNodesPercentage: Invalid value: {pct!r}: not in valid range [0, 100]"
            )
        if not isinstance(absolute, int) or absolute < 0:
            raise ValueError(
                f"minCandidateNodesAbsolute: Invalid value: {absolute!r}: not in valid range "
                "[0, inf)"
            )
        if pct == 0 and absolute == 0:
            raise ValueError(
                "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same "
                "time as minCandidateNodesAbsolute"
            )
        self.min_candidate_nodes_percentage = pct
        self.min_candidate_nodes_absolute = absolute

    def candidate_count(self, potential: int) -> int:
        """kube's calculateNumCandidates: candidates to find among `potential` nodes."""
        wanted = max(potential * self.min_candidate_nodes_percentage // 100,
                     self.min_candidate_nodes_absolute)  # fmt: skip
        return min(wanted, potential)

    def post_filter(
        self,
        state: framework.CycleState,
        pod: models.Pod,
        table: NodeTable,
        candidates: Sequence[int],
        fits: Callable[[], BoolArray],
    ) -> framework.PostFilterResult | None:
        if pod.preemption_policy == "Never":
            return None
        pdbs = list(table.pdbs.values())
        found: list[Candidate] = []
        limit = self.candidate_count(len(candidates))
        for row in candidates:
            if len(found) >= limit:
                break
            candidate = self._victims_on(pod, table, row, pdbs, fits)
            if candidate is not None:
                found.append(candidate)
        if not found:
            return None
        best = min(found, key=Candidate.rank)
        return framework.PostFilterResult(node=table.names[best.row], victims=best.victims)

    def _victims_on(
        self,
        pod: models.Pod,
        table: NodeTable,
        row: int,
        pdbs: Sequence[models.PodDisruptionBudget],
        fits: Callable[[], BoolArray],
    ) -> Candidate | None:
        node = table.names[row]
        lower = sorted(
            (p for p in table.pods[row].values() if p.priority < pod.priority),
            key=more_important_first,
        )
        if not lower:
            return None
        for p in lower:
            table.remove_pod(node, p.uid)
        removed = list(lower)
        try:
            if not bool(fits()[table.row_of[node]]):
                return None
            violating, fine = split_by_pdb(lower, pdbs)
            victims: list[models.Pod] = []
            violations = 0
            for p in violating + fine:
                table.add_pod(node, p)
                removed.remove(p)
                if not bool(fits()[table.row_of[node]]):
                    table.remove_pod(node, p.uid)
                    removed.append(p)
                    victims.append(p)
                    violations += p in violating
            return Candidate(row, tuple(victims), violations)
        finally:
            for p in removed:
                table.add_pod(node, p)
