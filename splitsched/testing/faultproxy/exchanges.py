"""The fault proxy's log: one ``Exchange`` per request, and what a test proves from it
(how many Bindings the API server accepted or was sent per pod, which faults hit)."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from splitsched.testing.faultproxy.rules import Fault

_BINDING_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding(?:\?|$)")


@dataclass(frozen=True)
class Exchange:
    """One request through the proxy, as the log keeps it."""

    at: float
    method: str
    path: str
    #: The API server's status (None when the request was not forwarded or failed).
    upstream_status: int | None
    #: The fault applied (None: passed through untouched, latency aside).
    fault: Fault | None
    #: Whether the client received an answer (False for resets and lost responses).
    delivered: bool
    delay: float = 0.0
    #: Whether the request reached the API server (False for injected resets and errors).
    forwarded: bool = True


class ExchangeLog:
    """Every exchange, appended by the proxy's thread and read by the test's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log: list[Exchange] = []

    def record(self, exchange: Exchange) -> None:
        with self._lock:
            self._log.append(exchange)

    def snapshot(self) -> list[Exchange]:
        with self._lock:
            return list(self._log)

    def faults_applied(self) -> Counter[str]:
        """How many requests each fault class hit (latency counted per delayed request)."""
        out: Counter[str] = Counter()
        for ex in self.snapshot():
            if ex.fault is not None:
                out[ex.fault.value] += 1
            if ex.delay > 0:
                out[Fault.LATENCY.value] += 1
        return out

    def accepted_bindings(self) -> Counter[str]:
        """``namespace/name`` -> Binding POSTs the API server answered 201 (whether or not
        the client heard it). More than 1 for a pod would be a double booking."""
        return self._bindings(lambda ex: ex.upstream_status == 201)

    def forwarded_bindings(self) -> Counter[str]:
        """``namespace/name`` -> Binding POSTs sent on to the API server, answered or not
        (a server killed mid-request may have committed one without answering)."""
        return self._bindings(lambda ex: ex.forwarded)

    def _bindings(self, counts: Callable[[Exchange], bool]) -> Counter[str]:
        out: Counter[str] = Counter()
        for ex in self.snapshot():
            m = _BINDING_PATH.match(ex.path)
            if m and ex.method == "POST" and counts(ex):
                out[f"{m.group(1)}/{m.group(2)}"] += 1
        return out
