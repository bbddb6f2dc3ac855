"""The nodes a binder knows to exist, for issue 17's refusal of a Binding to a node that
does not exist (the API server accepts a Binding to any name).

Knowing is cheap: one LIST of every node's name (``apirequests.list_node_names``: a
Table from the API server's watch cache) stands for a GET of each. Every listed or read node is
known for ``NODE_TTL`` seconds; a binding to a node not known then lists again, at most
once per ``LIST_INTERVAL`` and once for all the callers waiting on it. A node the last list
did not show (newer than the list, or when listing fails: no ``list`` right on nodes, say)
is read on its own by ``services.binder.admission``.

At 5,000 nodes the binders read one node per binding or so, as many reads as of pods (a
py-spy profile of the 5k bench: 10% of a binder's samples); the list is one request per
``NODE_TTL``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Collection

log = logging.getLogger(__name__)

#: Seconds a node seen to exist (listed or read) is not looked for again.
NODE_TTL = 30.0
#: Least seconds between two lists, a failed one included.
LIST_INTERVAL = 10.0
#: Longest a binding waits for a list before it reads its node on its own (the caller
#: caps the deadline it passes to ``refresh``).
LIST_BUDGET = 5.0
#: Forget expired nodes once this many are remembered.
PRUNE_ABOVE = 100_000

#: Lists the names of every node by a deadline (the caller's clock); None when it could not.
ListNames = Callable[[float], Awaitable[Collection[str] | None]]


class KnownNodes:
    """Which nodes were seen to exist within ``NODE_TTL``."""

    def __init__(
        self, list_names: ListNames, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._list_names = list_names
        self._monotonic = monotonic
        self._seen: dict[str, float] = {}
        self._listed_at = -math.inf
        self._listing: asyncio.Task[None] | None = None

    def known(self, node: str) -> bool:
        return self._seen.get(node, 0.0) > self._monotonic()

    def saw(self, *nodes: str) -> None:
        """``nodes`` exist now."""
        now = self._monotonic()
        until = now + NODE_TTL
        for node in nodes:
            self._seen[node] = until
        if len(self._seen) > PRUNE_ABOVE:
            self._seen = {n: t for n, t in self._seen.items() if t > now}

    async def refresh(self, deadline: float) -> None:
        """List the nodes unless a list ran within ``LIST_INTERVAL`` (then return at once);
        callers that come while a list runs wait for that one."""
        if self._listing is None:
            now = self._monotonic()
            if now - self._listed_at < LIST_INTERVAL:
                return
            self._listed_at = now
            self._listing = asyncio.create_task(self._list(deadline))
        listing = self._listing
        # A caller cancelled while it waits leaves the list running for the others.
        await asyncio.shield(listing)

    async def _list(self, deadline: float) -> None:
        try:
            names = await self._list_names(deadline)
            if names is not None:
                self.saw(*names)
        except Exception:  # a bug: the single reads still guard every binding
            log.exception("listing the nodes failed")
        finally:
            self._listing = None
