"""Retry delays shared by the services' retry loops.

Called by `services.binder.retrying` (every request the binder retries) and
`services.binder.reporter` (outcome reports to the scheduler).
"""

from __future__ import annotations

import random


def backoff_delay(attempt: int, *, base: float, cap: float, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**(attempt-1))] after ``attempt`` failures,
    so clients that failed together do not retry together."""
    ceiling = min(cap, base * (2 ** min(max(attempt - 1, 0), 30)))
    return rng.uniform(0.0, ceiling)
