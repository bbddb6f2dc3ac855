"""DefaultPreemption: when a pod fits nowhere, find the node where evicting the fewest,
least important lower-priority pods makes it fit (kube-scheduler's PostFilter).

For each candidate node (rejected by a filter that freeing room could satisfy), remove
every lower-priority pod, check the pod fits, then give back as many of them as possible,
most important first and PodDisruptionBudget-protected ones before the rest; what cannot
be given back are the victims. The node is then chosen by kube-scheduler's criteria in
order: fewest PDB violations, lowest highest-victim priority, smallest sum of victim
priorities, fewest victims, latest start of the highest-priority victims, first node.
The table is restored exactly after every what-if.

Candidates are only the nodes whose rejection is kube's Unschedulable (never
UnschedulableAndUnresolvable ones, `framework.PartlyResolvable`). When none will do, the
answer is kube-scheduler's status, which ends the FailedScheduling message: "preemption: "
then "not eligible due to preemptionPolicy=Never." or a FitError over the dry run (each
node tried, with "No preemption victims found for incoming pod" or the reasons the pod
does not fit even without its victims; every node not tried, "Preemption is not helpful
for scheduling"). Not modelled: kube's "not eligible due to a terminating pod on the
nominated node" (this view holds no terminating pods).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from splitsched.core import framework, models, results
from splitsched.core.nodetable import NodeTable

#: kube-scheduler's words (preemption.go, default_preemption.go), which its PostFilter
#: status carries into the FailedScheduling message.
PREFIX = "preemption: "
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
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
        misfit: framework.Misfit,
    ) -> framework.PostFilterResult | framework.Status:
        if pod.preemption_policy == "Never":
            return framework.Status.unschedulable(f"{PREFIX}{NOT_ELIGIBLE_NEVER}")
        pdbs = list(table.pdbs.values())
        found: list[Candidate] = []
        why_not: dict[int, tuple[str, ...]] = {}
        limit = self.candidate_count(len(candidates))
        for row in candidates:
            if len(found) >= limit:
                break
            outcome = self._victims_on(pod, table, row, pdbs, misfit)
            if isinstance(outcome, Candidate):
                found.append(outcome)
            else:
                why_not[row] = outcome
        if not found:
            return framework.Status.unschedulable(PREFIX + not_helpful(table.n, why_not))
        best = min(found, key=Candidate.rank)
        return framework.PostFilterResult(node=table.names[best.row], victims=best.victims)

    def _victims_on(
        self,
        pod: models.Pod,
        table: NodeTable,
        row: int,
        pdbs: Sequence[models.PodDisruptionBudget],
        misfit: framework.Misfit,
    ) -> Candidate | tuple[str, ...]:
        """The fewest, least important victims on `row`, or why preempting there cannot
        help: no pod of lower priority, or the pod does not fit even without them (the
        rejecting plugin's reasons)."""
        node = table.names[row]
        lower = sorted(
            (p for p in table.pods[row].values() if p.priority < pod.priority),
            key=more_important_first,
        )
        if not lower:
            return (NO_VICTIMS,)
        for p in lower:
            table.remove_pod(node, p.uid)
        removed = list(lower)
        try:
            unfit = misfit(table.row_of[node])
            if unfit:
                return unfit
            violating, fine = split_by_pdb(lower, pdbs)
            victims: list[models.Pod] = []
            violations = 0
            for p in violating + fine:
                table.add_pod(node, p)
                removed.remove(p)
                if misfit(table.row_of[node]):
                    table.remove_pod(node, p.uid)
                    removed.append(p)
                    victims.append(p)
                    violations += p in violating
            return Candidate(row, tuple(victims), violations)
        finally:
            for p in removed:
                table.add_pod(node, p)


def not_helpful(total: int, why_not: Mapping[int, tuple[str, ...]]) -> str:
    """kube-scheduler's FitError over the dry run: each tried node's reasons, and every
    node not tried (no eviction could resolve its rejection) as not helpful."""
    counts: Counter[str] = Counter()
    for reasons in why_not.values():
        counts.update(reasons)
    if total > len(why_not):
        counts[NOT_HELPFUL] += total - len(why_not)
    return results.format_summary(total, counts)
