"""Flow control towards the binders: how many bindings may be in flight at once.

Without it the scheduler decides every pod it can under a burst, the binders' intake
fills, and most decisions expire there and are decided again (docs/backpressure.md). The
window is a TCP-like congestion window over the bindings sent and not yet resolved:

- it grows for each binding bound within `target` seconds (half the bind timeout)
  while the window is at least half used, so it follows the binders' pace (Little's
  law: in flight = rate x latency, and latency is what the deadline bounds): by one
  each at first (slow start: it doubles every round), by one per window's worth once
  the binders have pushed back (congestion avoidance), so it does not overshoot again;
- it shrinks by one for each binding bound later than that, before the deadline is hit;
- it halves on a congestion signal (a binder's "queue full", its DEADLINE_EXCEEDED for a
  decision it never started, or a decision expiring unresolved), at most once per round:
  a signal about a decision made before the last cut says nothing new (TCP's fast
  recovery does the same).

Between `MIN_WINDOW` and `cap` (`--max-decisions-in-flight`). Pure: the caller passes the
clock's readings and the number in flight.
"""

from __future__ import annotations

#: The smallest window: a few bindings always go, so outcomes keep coming and it regrows.
MIN_WINDOW = 16
#: The window before any outcome was seen: a few BindBatch calls' worth.
INITIAL_WINDOW = 512
#: The share of the bind timeout a binding may take and still count as on time.
TARGET_SHARE = 0.5


class FlowWindow:
    """The congestion window; `open` says whether another binding (or gang) may go."""

    def __init__(self, *, cap: int, bind_timeout: float) -> None:
        if cap < 1:
            raise ValueError(f"the window's cap must be at least 1, got {cap}")
        self.cap = cap
        self.floor = min(MIN_WINDOW, cap)
        self._size = float(min(INITIAL_WINDOW, cap))
        self.target = bind_timeout * TARGET_SHARE
        #: Until the binders first push back (a late binding or a congestion signal).
        self.slow_start = True
        #: When the window was last halved: signals about older decisions are ignored.
        self._cut_at = float("-inf")

    @property
    def size(self) -> int:
        """How many bindings may be in flight now."""
        return int(self._size)

    def open(self, in_flight: int) -> bool:
        """Whether room is left. A gang checks once and goes whole, so the window may be
        overshot by one gang rather than splitting it or starving it."""
        return in_flight < self.size

    def bound(self, *, created: float, now: float, in_flight: int) -> None:
        """A binding bound: on time grows the window (only while it is used: an idle
        scheduler must not reach a burst with a window nothing has tested), late shrinks
        it."""
        if now - created > self.target:
            self.slow_start = False
            self._size = max(self.floor, self._size - 1)
        elif in_flight * 2 >= self._size:
            step = 1.0 if self.slow_start else 1.0 / self._size
            self._size = min(self.cap, self._size + step)

    def congested(self, *, created: float, now: float) -> None:
        """A binding the binders could not take or finish in time: halve the window,
        once for all the decisions made before this cut."""
        self.slow_start = False
        if created <= self._cut_at:
            return
        self._cut_at = now
        self._size = max(self.floor, self._size / 2)
