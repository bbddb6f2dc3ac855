"""One pass of a profile's Filter plugins over the node table.

Each plugin answers for every row at once; a row keeps the index of the first plugin that
rejected it (`fit_error` reads why). A plugin that costs much per node (`FilterWithin`) is
shown which rows are still feasible. A plugin's error (`FilterError`) ends the pass as
kube's does: every row still feasible is that plugin's, and the cycle state says why.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, IntArray, NodeTable


def run_filters(
    filters: Sequence[framework.FilterPlugin],
    state: framework.CycleState,
    pod: models.Pod,
    table: NodeTable,
    mask: BoolArray,
    rejected_by: IntArray,
) -> None:
    """Narrow `mask` (in place) to the rows every filter passes, marking `rejected_by`."""
    for i, plugin in enumerate(filters):
        if plugin.name in state.skip_filter:
            continue
        fits = _fits(plugin, state, pod, table, mask)
        newly = mask & ~fits
        if newly.any():
            rejected_by[newly] = i
            mask &= fits
            if not mask.any():
                return


def _fits(
    plugin: framework.FilterPlugin,
    state: framework.CycleState,
    pod: models.Pod,
    table: NodeTable,
    mask: BoolArray,
) -> BoolArray:
    within = getattr(plugin, "filter_within", None)  # 8 µs less than isinstance(FilterWithin)
    try:
        if within is not None:
            fits: BoolArray = within(state, pod, table, mask)
            return fits
        return plugin.filter(state, pod, table)
    except framework.FilterError as exc:
        state.filter_error = (plugin.name, error_message(plugin.name, exc))
        return np.zeros(table.n, dtype=np.bool_)


def error_message(plugin: str, exc: framework.FilterError) -> str:
    """kube-scheduler's words for a Filter plugin's error."""
    return f'running "{plugin}" filter plugin: {exc}'
