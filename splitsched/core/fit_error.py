"""Why a pod fits nowhere, in kube-scheduler's words: every node's reasons, counted as its
FitError counts them, then what the PostFilter plugins say.

The algorithm's filter pass marks each row with the index of the first filter that
rejected it, or with a code past the filters' indexes (`NOT_SUGGESTED`, `HELD_ROOM`,
`LEFT_OUT`). `Rejections` reads those marks: the WaitInfo (`wait`) and the rows whose
rejection evicting pods could resolve (`preemption_candidates`: kube's Unschedulable, not
UnschedulableAndUnresolvable). `post_filter` runs the profile's PostFilter plugins as
kube's RunPostFilterPlugins does and ends the message with their words. Pure; used by
`splitsched.core.algorithm` only.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import IntArray, NodeTable
from splitsched.core.nominated_rooms import NOMINATED_PODS
from splitsched.core.results import PreemptInfo, ScheduleResult, WaitInfo, format_summary

# Marks past the filters' indexes: a row not among the suggested nodes; one where the pod
# fits only without the pods nominated there; one a PreFilter plugin's node subset left out.
NOT_SUGGESTED, HELD_ROOM, LEFT_OUT = 0, 1, 2

#: Why the pod does not fit each of these rows beside the pods nominated there, and the
#: plugins to blame (`nominated_rooms.held_room_reasons`).
HeldReasons = Callable[[Sequence[int]], tuple[dict[int, tuple[str, ...]], set[str]]]


@dataclass(frozen=True, slots=True)
class Rejections:
    """One filter pass's marks over the table (`rejected_by`), and what reading them needs."""

    table: NodeTable
    profile: framework.Profile
    state: framework.CycleState
    pod: models.Pod
    rejected_by: IntArray
    held_reasons: HeldReasons

    def _marked(self, mark: int) -> list[int]:
        marked: list[int] = np.flatnonzero(
            self.rejected_by == len(self.profile.filter) + mark
        ).tolist()
        return marked

    def rows(self, failed: set[str]) -> Iterator[tuple[str, int, tuple[str, ...]]]:
        """(plugin, row, reasons) of every row a filter rejected, a room held for nominated
        pods took or a PreFilter's node subset left out; adds the plugins to blame to
        `failed`."""
        for i, plugin in enumerate(self.profile.filter):
            rows = np.flatnonzero(self.rejected_by == i).tolist()
            if rows:
                failed.add(plugin.name)
                reasons = plugin.failure_reasons(self.state, self.pod, self.table, rows)
                yield from ((plugin.name, r, rs) for r, rs in zip(rows, reasons, strict=True))
        held = self._marked(HELD_ROOM)
        if held:
            reasons_of, plugins = self.held_reasons(held)
            failed |= plugins
            yield from ((NOMINATED_PODS, r, rs) for r, rs in reasons_of.items())
        subset = self.state.node_subset
        left_out = self._marked(LEFT_OUT) if subset is not None else []
        if subset is not None and left_out:
            failed.update(subset.plugins)
            reason = (subset.left_out_reason,)
            yield from ((" ".join(subset.plugins), r, reason) for r in left_out)

    def wait(self) -> WaitInfo:
        """Every row's reasons, counted as kube-scheduler's FitError counts them."""
        counts: Counter[str] = Counter()
        node_reasons: dict[str, str] = {}
        node_plugins: dict[str, str] = {}
        failed: set[str] = set()
        names = self.table.names
        for plugin, row, rs in self.rows(failed):
            counts.update(rs)
            node_reasons[names[row]] = "; ".join(rs)
            node_plugins[names[row]] = plugin
        outside = self._marked(NOT_SUGGESTED)
        if outside:
            counts["node(s) were not among the suggested nodes"] += len(outside)
            for row in outside:
                node_reasons[names[row]] = "not among the suggested nodes"
        return WaitInfo(
            summary=format_summary(self.table.n, counts),
            reason_counts=dict(counts),
            failed_plugins=frozenset(failed),
            failed_node_reasons=node_reasons,
            failed_node_plugins=node_plugins,
            total_nodes=self.table.n,
        )

    def preemption_candidates(self) -> list[int]:
        """The rows whose rejection evicting pods could resolve, in row order."""
        out = self._marked(HELD_ROOM)
        for i, plugin in enumerate(self.profile.filter):
            if not plugin.resolvable_by_preemption:
                continue
            rows = np.flatnonzero(self.rejected_by == i).tolist()
            if rows and isinstance(plugin, framework.PartlyResolvable):
                no = plugin.unresolvable(self.state, self.pod, self.table, rows)
                rows = [row for row, hopeless in zip(rows, no, strict=True) if not hopeless]
            out.extend(rows)
        return sorted(out)

    def reasons_of(self, row: int) -> tuple[str, ...]:
        """Why the pod does not fit this one row (empty if it does)."""
        one = np.full(self.table.n, -2, dtype=np.int64)  # -2 marks nothing
        one[row] = self.rejected_by[row]
        only = dataclasses.replace(self, rejected_by=one)
        return next((rs for _, _, rs in only.rows(set())), ())


def post_filter(
    *,
    table: NodeTable,
    profile: framework.Profile,
    state: framework.CycleState,
    pod: models.Pod,
    wait: WaitInfo,
    candidates: Sequence[int],
    misfit: framework.Misfit,
) -> ScheduleResult:
    """kube-scheduler's RunPostFilterPlugins, in profile order: the first nomination wins.
    Otherwise the FitError message ends with what the Unschedulable ones said, joined by
    ", "; a plugin answering anything else ends the list with its words alone (nothing for
    a success without a nomination)."""
    said: list[str] = []
    for post in profile.post_filter:
        out = post.post_filter(state, pod, table, candidates, misfit)
        if isinstance(out, framework.PostFilterResult):
            return ScheduleResult(preempt=PreemptInfo(out.node, out.victims, wait), state=state)
        if out.code is not framework.Code.UNSCHEDULABLE:
            said = [] if out.ok else list(out.reasons)
            break
        said.extend(out.reasons)
    if said:
        wait = dataclasses.replace(wait, summary=f"{wait.summary} {', '.join(said)}")
    return ScheduleResult(wait=wait, state=state)
