"""The pods waiting for a node in the profiles a binder serves, as one watch shows them,
so that a binding's checks (``services.binder.guard``) need no read of its pod.

Before each Binding the binder checked the pod: that it exists with the decision's uid, is
of a served profile and mounts the claims the decision names. That GET was a round trip
kube-scheduler does not make (it binds from its informer's copy), and half the binder's
requests. Every field the guard reads of a pod is immutable (uid, ``schedulerName``,
``priority``, ``volumes``), so a watched copy with the decision's uid answers exactly as a
read would; a pod the watch has not shown yet (newer than the watch, or no watch at all) is
read as before. A pod deleted before the watch says so passes the checks, and its
uid-checked Binding is refused by the API server, as when the read finds it gone.

One watch per profile, ``spec.schedulerName=<profile>,spec.nodeName=`` (the pods the
scheduler may send): from resourceVersion "0" (the API server's cache sends every
matching pod first, then changes), resumed from the last version seen, started over on 410.
A bound pod leaves the selector, and the watch says DELETED. Without the ``watch`` right
on pods the binder warns once and reads each pod, as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any
from urllib.parse import urlencode

import aiohttp

from splitsched.runtime import kubeclient

log = logging.getLogger(__name__)

#: Pods kept at most; past it the oldest is forgotten (its binding reads it instead).
MAX_PODS = 100_000
#: The server ends a watch after this many seconds; it is opened again from where it was.
WATCH_SECONDS = 300
#: First and longest wait before a broken watch is opened again (seconds).
BACKOFF = (0.5, 30.0)
#: Answers that say the watch will never be allowed: stop watching, read each pod.
REFUSED = frozenset({401, 403, 404})

PodName = tuple[str, str]


class Gone(Exception):
    """410: the version to resume from is too old; watch again from "0"."""


def kept(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What the guard reads of a pod, and nothing else (a pod's spec can be large)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    volumes = [
        v for v in spec.get("volumes") or ()
        if isinstance(v, Mapping) and ("persistentVolumeClaim" in v or "ephemeral" in v)
    ]  # fmt: skip
    return {
        "metadata": {k: meta.get(k) for k in ("namespace", "name", "uid")},
        "spec": {
            "schedulerName": spec.get("schedulerName"),
            "priority": spec.get("priority"),
            "volumes": volumes,
        },
    }


class PendingPods:
    """The pending pods a watch showed, by namespace and name (pure: fed watch events)."""

    def __init__(self, *, max_pods: int = MAX_PODS) -> None:
        self._pods: OrderedDict[PodName, dict[str, Any]] = OrderedDict()
        self._max_pods = max_pods

    def __len__(self) -> int:
        return len(self._pods)

    def get(self, namespace: str, name: str, uid: str) -> Mapping[str, Any] | None:
        """The pod, when shown with ``uid`` (any uid when ``uid`` is empty)."""
        pod = self._pods.get((namespace, name))
        if pod is None or uid not in ("", pod["metadata"]["uid"]):
            return None
        return pod

    def forget_profile(self, profile: str) -> None:
        """Forget the pods of ``profile`` (its watch starts over and shows them again)."""
        for key in [k for k, p in self._pods.items() if p["spec"]["schedulerName"] == profile]:
            del self._pods[key]

    def handle(self, event: Mapping[str, Any]) -> str:
        """Apply one watch event; returns its resourceVersion ("" when it has none).
        Raises ``Gone`` for a 410 ERROR event, ``kubeclient.ApiError`` for another."""
        kind = event.get("type")
        obj = event.get("object")
        obj = obj if isinstance(obj, Mapping) else {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise Gone()
            raise kubeclient.ApiError(code, str(obj.get("message") or ""))
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if kind in ("ADDED", "MODIFIED") and all(key):
            self._pods[key] = kept(obj)
            self._pods.move_to_end(key)
            while len(self._pods) > self._max_pods:
                self._pods.popitem(last=False)
        elif kind == "DELETED" and self.get(*key, str(meta.get("uid") or "")) is not None:
            del self._pods[key]
        return str(meta.get("resourceVersion") or "")


class PodWatch:
    """Keeps a ``PendingPods`` current: one watch per profile, forever (``run``)."""

    def __init__(
        self,
        kube: kubeclient.KubeClient,
        pods: PendingPods,
        profiles: Collection[str],
        *,
        backoff: tuple[float, float] = BACKOFF,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._kube = kube
        self._pods = pods
        self.profiles = sorted(set(profiles))
        self._backoff = backoff
        self._sleep = sleep
        #: The resourceVersion each profile's watch resumes from.
        self.versions: dict[str, str] = {}

    async def run(self) -> None:
        await asyncio.gather(*(self._watch(profile) for profile in self.profiles))

    async def _watch(self, profile: str) -> None:
        delay = self._backoff[0]
        while True:
            try:
                if await self._once(profile):
                    delay = self._backoff[0]
                continue
            except Gone:
                self.versions[profile] = "0"
                self._pods.forget_profile(profile)
                continue
            except kubeclient.ApiError as exc:
                if exc.status in REFUSED:
                    log.warning("cannot watch the pending pods of %s, reading each pod "
                                "instead: %s", profile, exc)  # fmt: skip
                    return
                error: Exception = exc
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
                error = exc
            log.info("the watch of %s's pending pods broke (%s); again in %.1fs",
                     profile, error or type(error).__name__, delay)  # fmt: skip
            await self._sleep(delay)
            delay = min(delay * 2, self._backoff[1])

    async def _once(self, profile: str) -> bool:
        """One watch until the server ends it; whether it brought any event."""
        params = {
            "watch": "1",
            "fieldSelector": f"spec.schedulerName={profile},spec.nodeName=",
            "resourceVersion": self.versions.get(profile) or "0",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        got = False
        path = f"/api/v1/pods?{urlencode(params)}"
        async with self._kube.stream(path, idle=WATCH_SECONDS + 30) as response:
            if response.status == 410:
                raise Gone()
            if response.status != 200:
                text = (await response.read()).decode(errors="replace")
                raise kubeclient.ApiError(response.status, text)
            async for event in kubeclient.json_lines(response):
                version = self._pods.handle(event)
                if version:
                    self.versions[profile] = version
                got = True
        return got
