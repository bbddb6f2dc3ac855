"""Values computed from the node specs (labels, taints, images), kept until they change.

Owned by the node table (`splitsched.core.nodetable`), which hands it its `spec_version`
on every read: a new version (nodes came, went or changed labels or taints) drops
everything. Two kinds of value: the table's and plugins' own indexes (`memoised`: a few,
kept all), and values keyed by what pods ask, a node selector's mask say (`recently`:
as many kinds as the pods bring, so only the most recently used are kept).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

_M = TypeVar("_M")

#: Values `SpecMemo.recently` keeps: a few node-sized masks each (about 65 KiB per mask
#: at 65,000 nodes).
RECENT_KEPT = 128


class SpecMemo:
    """The memo of one node table; `version` is the table's `spec_version`."""

    def __init__(self) -> None:
        self._kept: dict[tuple[object, ...], object] = {}
        self._recent: OrderedDict[tuple[object, ...], object] = OrderedDict()
        self._version = -1

    def _check(self, version: int) -> None:
        if version != self._version:
            self._kept.clear()
            self._recent.clear()
            self._version = version

    def memoised(self, version: int, key: tuple[object, ...], compute: Callable[[], _M]) -> _M:
        """`compute()`, kept until the version changes."""
        self._check(version)
        hit = self._kept.get(key)
        if hit is None:
            hit = self._kept[key] = compute()
        return hit  # type: ignore[return-value]

    def recently(self, version: int, key: tuple[object, ...], compute: Callable[[], _M]) -> _M:
        """`memoised`, but only the `RECENT_KEPT` most recently used stay."""
        self._check(version)
        recent = self._recent
        hit = recent.get(key)
        if hit is None:
            hit = recent[key] = compute()
            if len(recent) > RECENT_KEPT:
                recent.popitem(last=False)
        else:
            recent.move_to_end(key)
        return hit  # type: ignore[return-value]
