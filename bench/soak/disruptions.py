"""The operations a soak puts the services through while the churn goes on: a rolling
restart of the binders (each stopped with SIGTERM and started again, one after the
other), a scheduler leader hand-over (the leader stopped with SIGTERM releases its Lease;
the standby takes over; the old leader comes back as the standby) and a cut watch (the
fault proxies end every open watch stream of the watcher and the binders).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from splitsched.testing import faultproxy, stack


@dataclass
class Disruptions:
    services: stack.RestartableStack
    proxies: dict[str, faultproxy.FaultProxy]
    #: (seconds since the start, what happened), for the report.
    log: list[tuple[float, str]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def _note(self, what: str) -> None:
        self.log.append((round(time.monotonic() - self.started, 1), what))

    def rolling_restart(self) -> None:
        """Each binder in turn: SIGTERM (it finishes or hands back its work), start again on
        the same ports, wait until it is ready before the next one."""
        for svc in list(self.services.binder_services):
            t = time.monotonic()
            self.services.stop_one(svc)
            self.services.restart(svc, timeout=120.0)
            self._note(f"{svc.name} restarted in {time.monotonic() - t:.1f}s")

    def leader_handover(self) -> None:
        """Stop the leading scheduler gracefully, wait for the standby to lead, and start
        the old leader again as the new standby."""
        leader = self.services.wait_leader(timeout=60.0)
        t = time.monotonic()
        self.services.stop_one(leader)
        new = self.services.wait_leader(timeout=120.0)
        took = time.monotonic() - t
        self.services.restart(leader, timeout=120.0, wait_ready=False)
        self._note(f"leader {leader.name} stopped; {new.name} led {took:.1f}s later")

    def cut_watches(self) -> None:
        cut = {name: proxy.cut_watches() for name, proxy in self.proxies.items()}
        self._note("watches cut: " + ", ".join(f"{k} {v}" for k, v in sorted(cut.items())))


@dataclass
class Timeline:
    """When each disruption runs, in seconds from the start: once (the hand-over) or on a
    period (the rolling restart, the cut watch)."""

    minutes: float
    done: set[str] = field(default_factory=set)
    last: dict[str, float] = field(default_factory=dict)

    @property
    def handover_at(self) -> float:
        """Before the warm-up ends in a long run (the new leader is then measured from
        minute 5 on); a third of the way into a short one."""
        return 60.0 * min(3.0, self.minutes * 0.35)

    @property
    def restart_every(self) -> float:
        return 60.0 * max(0.75, self.minutes / 6)

    @property
    def cut_every(self) -> float:
        return 60.0 * max(0.5, self.minutes / 10)

    def due(self, elapsed: float) -> list[str]:
        """What is due at ``elapsed`` seconds: "handover", "restart", "cut" (each marked
        done)."""
        out = []
        if "handover" not in self.done and elapsed >= self.handover_at:
            self.done.add("handover")
            out.append("handover")
        for name, every in (("restart", self.restart_every), ("cut", self.cut_every)):
            if elapsed - self.last.get(name, 0.0) >= every:
                self.last[name] = elapsed
                out.append(name)
        return out
