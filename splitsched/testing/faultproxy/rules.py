"""What the fault proxy does to a request: the fault kinds, one ``Rule`` (which requests,
how often, how many times) and the ``RuleBook`` that decides, for one request, the added
latency and the one answer-changing rule that fires. Pure: no sockets, safe to call from
the proxy's thread while a test thread changes the rules.
"""

from __future__ import annotations

import enum
import random
import re
import threading
from dataclasses import dataclass, field


class Fault(enum.Enum):
    """What a rule does to a matching request (see the package docstring)."""

    LATENCY = "latency"
    ERROR = "error"
    THROTTLE = "throttle"
    RESET = "reset"
    LOSE_RESPONSE = "lose_response"


@dataclass
class Rule:
    """One fault for requests whose method fully matches ``method`` and whose path (with
    the query string) contains a match of ``path``.

    Fires with ``probability``, at most ``count`` times (None: unlimited). ``seconds`` is
    the delay of LATENCY and the Retry-After of THROTTLE; ``status`` the answer of ERROR.
    ``when_status``: LOSE_RESPONSE only loses answers with this status (e.g. 201).
    """

    fault: Fault
    method: str = ".*"
    path: str = ".*"
    probability: float = 1.0
    count: int | None = None
    seconds: float = 0.0
    status: int = 503
    when_status: int | None = None
    #: How many times it fired (read it from the test; the proxy updates it).
    fired: int = 0
    _method_re: re.Pattern[str] = field(init=False, repr=False)
    _path_re: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability {self.probability} is not in [0, 1]")
        if self.fault is Fault.ERROR and not 400 <= self.status <= 599:
            raise ValueError(f"ERROR status {self.status} is not an HTTP error")
        self._method_re = re.compile(self.method, re.IGNORECASE)
        self._path_re = re.compile(self.path)

    def matches(self, method: str, path: str) -> bool:
        return bool(self._method_re.fullmatch(method) and self._path_re.search(path))

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count

    @property
    def counts_on_answer(self) -> bool:
        """A LOSE_RESPONSE with ``when_status`` fires only once the answer's status is
        known (``RuleBook.loses``), not when it is picked."""
        return self.fault is Fault.LOSE_RESPONSE and self.when_status is not None


class RuleBook:
    """The installed rules, in the order they were added, and the random draws that make
    them fire (seeded: a run can be replayed)."""

    def __init__(self, *, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._rules: list[Rule] = []

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def snapshot(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def pick(self, method: str, path: str) -> tuple[float, Rule | None]:
        """Total latency and the one answer-changing rule that fires for this request.

        Every matching LATENCY rule that fires adds its delay; of the other rules, the
        first that matches and fires wins.
        """
        delay = 0.0
        chosen: Rule | None = None
        with self._lock:
            for rule in self._rules:
                if rule.exhausted or not rule.matches(method, path):
                    continue
                if rule.fault is Fault.LATENCY:
                    if self._rng.random() < rule.probability:
                        rule.fired += 1
                        delay += rule.seconds
                    continue
                if chosen is None and self._rng.random() < rule.probability:
                    chosen = rule
                    if not rule.counts_on_answer:
                        rule.fired += 1
        return delay, chosen

    def loses(self, rule: Rule | None, status: int) -> bool:
        """Whether the picked ``rule`` loses an answer with this ``status`` (and count the
        firing of a LOSE_RESPONSE that waited for the status)."""
        if rule is None or rule.fault is not Fault.LOSE_RESPONSE:
            return False
        if rule.when_status is None:
            return True
        if status != rule.when_status:
            return False
        with self._lock:
            rule.fired += 1
        return True
