"""Per-domain arithmetic over a label's ids (`NodeTable.label_values`): a topology domain
is a distinct value of its key, and a row's id says which one it is in (-1: the node lacks
the label). Used by `topology_spread` and `inter_pod_affinity`; pure numpy, kept apart so
the plugins read as the Kubernetes semantics.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from splitsched.core.nodetable import BoolArray, IntArray

LabelIds = npt.NDArray[np.int32]


def domain_sums(ids: LabelIds, counts: IntArray, rows: BoolArray, size: int) -> IntArray:
    """Per domain id, the sum of `counts` over the selected rows (one spare trailing slot, so
    indexing with a clamped -1 is always in range). Works on the few rows with pods."""
    hit = np.flatnonzero(counts != 0)  # a bool mask's nonzero is five times an int's
    hit = hit[rows[hit] & (ids[hit] >= 0)]
    return np.bincount(ids[hit], weights=counts[hit], minlength=size + 1).astype(np.int64)


#: Up to this many domains in (or out), `rows_in` compares ids instead of gathering.
_FEW_DOMAINS = 8


def rows_in(ids: LabelIds, domains: BoolArray) -> BoolArray:
    """Per row, whether its domain id is one of `domains` (a mask over the ids; a row
    without the label, id -1, is in none). When few domains are in, or few are out, a
    comparison per domain is cheaper than a gather over every row."""
    inside = np.flatnonzero(domains)
    if inside.size <= _FEW_DOMAINS:
        out = np.zeros(ids.shape, dtype=np.bool_)
        for d in inside.tolist():
            out |= ids == d
        return out
    outside = np.flatnonzero(~domains)
    if outside.size <= _FEW_DOMAINS:
        out = ids >= 0
        for d in outside.tolist():
            out &= ids != d
        return out
    gathered: BoolArray = np.append(domains, False)[ids]  # -1 reads the appended False
    return gathered
