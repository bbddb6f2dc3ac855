"""Leader election for scheduler replicas over a coordination.k8s.io/v1 Lease.

Called by `services.scheduler.main` when `--leader-elect` is on: the Lease is the only
Kubernetes object the scheduler ever touches (RBAC: get, create, update on leases). One
replica holds the Lease and schedules; the others keep a warm view and wait.

The semantics are client-go's `leaderelection` (what kube-scheduler uses):

* A candidate reads the Lease every `retry_period`. It may claim it when it is absent,
  has no holder (released), or has not changed for `leaseDurationSeconds` *as measured on
  the candidate's own clock since it last saw the record change* — never by comparing
  the holder's `renewTime` with the local wall clock, so clock skew between hosts cannot
  shorten a lease.
* Claims and renewals are writes with optimistic concurrency: a POST that finds the
  Lease already created, or a PUT whose `metadata.resourceVersion` is stale, gets 409 —
  someone else won, and the loser stays a candidate.
* The leader renews every `retry_period`. If it cannot renew for `renew_deadline`
  seconds (strictly less than the lease duration, so it stops before anyone else may
  start) or sees another holder, it has lost: the scheduler stops scheduling at once and
  exits non-zero so Kubernetes restarts it as a clean standby.
* On a graceful stop the leader releases the Lease (empty holder) so a standby takes
  over at its next read instead of waiting for expiry.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from splitsched.runtime import kubeclient

log = logging.getLogger(__name__)

Json = dict[str, Any]
NETWORK_ERRORS = kubeclient.NETWORK_ERRORS
#: Acquire attempts wait retry_period * uniform(1, 1 + JITTER) (client-go uses 1.2).
JITTER = 0.2


class LeaderElectionError(RuntimeError):
    """Leader election cannot work as configured (bad timings, unreadable kubeconfig)."""


#: What fails one round of reading or writing the Lease.
ROUND_ERRORS: tuple[type[Exception], ...] = (LeaderElectionError, *NETWORK_ERRORS)


#: Conflicts a release reads the Lease again for before it gives up.
RELEASE_CONFLICTS = 2


def micro_time(when: float) -> str:
    """An RFC 3339 MicroTime, the format of Lease times."""
    return dt.datetime.fromtimestamp(when, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_path(namespace: str, name: str = "") -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases"
    return f"{base}/{quote(name)}" if name else base


class LeaderElector:
    """Campaigns for one Lease and keeps it while it can (see the module docstring).

    `run` returns when leadership is lost (never, while it is held); `is_leading` is what
    the scheduling loop checks before every slice of work.
    """

    def __init__(
        self,
        *,
        client: kubeclient.KubeClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 10.0,
        renew_deadline: float = 7.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        if not identity:
            raise LeaderElectionError("leader election needs a non-empty identity")
        if not lease_duration > renew_deadline > retry_period > 0:
            raise LeaderElectionError(
                "need lease duration > renew deadline > retry period > 0, got "
                f"{lease_duration} > {renew_deadline} > {retry_period}"
            )
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._wall = wall
        self._rng = rng or random.Random()
        self._leading = False
        #: When the last successful renewal was *sent* (local clock): leadership is valid
        #: for `renew_deadline` after it.
        self._renewed_at = -math.inf
        #: The last Lease object read or written, and when (local clock) it last changed.
        self._observed: Json | None = None
        self._observed_version = ""
        self._observed_at = -math.inf
        self._last_error = ""
        #: Reads of the Lease so far (tests use it to wait for a candidate's next try).
        self.observations = 0
        #: Set when this candidate last saw the Lease held by someone else.
        self.holder = ""

    # ---- state -------------------------------------------------------------------------
    def is_leading(self) -> bool:
        """True while this replica holds the Lease: renewed within `renew_deadline`."""
        return self._leading and self._clock() - self._renewed_at < self.renew_deadline

    @property
    def description(self) -> str:
        return f"lease {self.namespace}/{self.name}"

    # ---- one round: read, decide, write ------------------------------------------------
    async def observe(self, *, budget: float | None = None) -> Json | None:
        """GET the Lease (None if absent) and note when its record last changed."""
        response = await self.client.request(
            "GET", lease_path(self.namespace, self.name), budget=budget or self.retry_period
        )
        self.observations += 1
        if response.status == 404:
            self._observed, self._observed_version = None, ""
            return None
        if response.status != 200 or not isinstance(response.body, dict):
            raise LeaderElectionError(
                f"reading {self.description}: HTTP {response.status} {response.message}"
            )
        lease: Json = response.body
        self._note(lease)
        spec = lease.get("spec") or {}
        self.holder = str(spec.get("holderIdentity") or "")
        return lease

    def _note(self, lease: Json) -> None:
        version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        if version != self._observed_version:
            self._observed_version = version
            self._observed_at = self._clock()
        self._observed = lease

    def claimable(self, lease: Json | None) -> bool:
        """May this candidate write itself into `lease` now (absent, released, ours, or
        unchanged for its whole duration since we last saw it change)?"""
        if lease is None:
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if not holder or holder == self.identity:
            return True
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        return self._observed_at + duration <= self._clock()

    async def claim(self, lease: Json | None, *, budget: float | None = None) -> bool:
        """Write ourselves as the holder: POST when absent, else PUT at the observed
        resourceVersion. False when someone else wrote first (409)."""
        now = self._wall()
        stamp = micro_time(now)
        seconds = max(1, math.ceil(self.lease_duration))
        seconds_left = budget or self.retry_period
        if lease is None:
            body: Json = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": seconds,
                    "acquireTime": stamp,
                    "renewTime": stamp,
                    "leaseTransitions": 0,
                },
            }
            response = await self.client.request(
                "POST", lease_path(self.namespace), body=body, budget=seconds_left
            )
        else:
            spec = dict(lease.get("spec") or {})
            ours = spec.get("holderIdentity") == self.identity
            if not ours:
                spec["acquireTime"] = stamp
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                    1 if spec.get("holderIdentity") else 0
                )
            spec["holderIdentity"] = self.identity
            spec["leaseDurationSeconds"] = seconds
            spec["renewTime"] = stamp
            spec.setdefault("acquireTime", stamp)
            body = {**lease, "spec": spec}
            response = await self.client.request(
                "PUT", lease_path(self.namespace, self.name), body=body, budget=seconds_left
            )
        if response.status == 409:
            return False
        if response.status not in (200, 201) or not isinstance(response.body, dict):
            raise LeaderElectionError(
                f"writing {self.description}: HTTP {response.status} {response.message}"
            )
        self._note(response.body)
        self.holder = self.identity
        return True

    async def try_acquire_or_renew(self, *, budget: float | None = None) -> bool:
        """One round; True when we hold the Lease afterwards. API and network errors are
        logged (once per distinct error) and count as a failed round."""
        try:
            lease = await self.observe(budget=budget)
            if not self.claimable(lease):
                return False
            return await self.claim(lease, budget=budget)
        except ROUND_ERRORS as exc:
            error = str(exc) or type(exc).__name__
            if error != self._last_error:
                log.warning("leader election (%s): %s", self.description, error)
                self._last_error = error
            return False

    # ---- the loop ----------------------------------------------------------------------
    async def run(
        self,
        *,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
    ) -> None:
        """Campaign until elected, then renew until leadership is lost; returns after
        calling `on_stopped_leading`. Cancel it to stop (then call `release`)."""
        while True:
            sent = self._clock()
            if await self.try_acquire_or_renew():
                break
            await asyncio.sleep(self.retry_period * self._rng.uniform(1.0, 1.0 + JITTER))
        self._renewed_at = sent
        self._leading = True
        self._last_error = ""
        log.info("%s acquired by %s", self.description, self.identity)
        on_started_leading()
        # Cancelled (a graceful stop): still the holder until `release` or expiry.
        await self._renew_until_lost()
        self._leading = False
        on_stopped_leading()

    async def _renew_until_lost(self) -> None:
        while True:
            await asyncio.sleep(self.retry_period)
            remaining = self.renew_deadline - (self._clock() - self._renewed_at)
            if remaining <= 0:
                log.error(
                    "%s: not renewed for %.1fs (renew deadline %.1fs): leadership lost",
                    self.description, self._clock() - self._renewed_at, self.renew_deadline,
                )  # fmt: skip
                return
            sent = self._clock()
            if await self.try_acquire_or_renew(budget=min(self.retry_period, remaining)):
                self._renewed_at = sent
                continue
            if self.holder and self.holder != self.identity:
                log.error("%s: now held by %s: leadership lost", self.description, self.holder)
                return

    async def release(self, *, budget: float = 2.0) -> bool:
        """Give the Lease up (empty holder, 1 s duration) so a standby takes over at its
        next read. Only when we hold it; True when released. A 409 (our last renewal
        landed after we noted the Lease, or a standby read-modified it) reads it again and
        tries once more while it is still ours."""
        if not self._leading or self._observed is None:
            return False
        self._leading = False
        lease: Json | None = self._observed
        for _ in range(RELEASE_CONFLICTS + 1):
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return False
            status, message = await self._put_released(lease, budget)
            if status == 200:
                log.info("%s released by %s", self.description, self.identity)
                return True
            if status != 409:
                log.warning("releasing %s: %s", self.description, message)
                return False
            try:
                lease = await self.observe(budget=budget)
            except LeaderElectionError as exc:
                log.warning("releasing %s: %s", self.description, exc)
                return False
            except NETWORK_ERRORS as exc:
                log.warning("releasing %s: reading it again failed: %s", self.description, exc)
                return False
        log.warning("releasing %s: %s", self.description, message)
        return False

    async def _put_released(self, lease: Json, budget: float) -> tuple[int, str]:
        """PUT `lease` with no holder; (HTTP status, or 0 on a network error; why)."""
        spec = dict(lease.get("spec") or {})
        stamp = micro_time(self._wall())
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=stamp, acquireTime=stamp)
        try:
            response = await self.client.request(
                "PUT",
                lease_path(self.namespace, self.name),
                body={**lease, "spec": spec},
                budget=budget,
            )
        except NETWORK_ERRORS as exc:
            return 0, f"failed: {exc}"
        return response.status, f"HTTP {response.status} {response.message}"
