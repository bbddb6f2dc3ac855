"""List+watch of Nodes, Pods, PodDisruptionBudgets, Namespaces and storage
(PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes) against the API
server, into a hub.

Called by `services.watcher.main`. Talks raw HTTP through an aiohttp session to the one
`splitsched.runtime.kubeclient.KubeEndpoint` (kubeconfig or in-cluster: TLS, token,
``tls-server-name``), and decodes JSON with orjson: the official client's model classes
cost milliseconds per object. Each object is converted once (`services.watcher.entries`)
and handed to `ClusterHub`.

Per resource, a `Reflector` runs: a paginated LIST (`limit`/`continue`), then WATCH from the
list's resourceVersion with bookmarks; on 410 Gone it relists (the hub diffs the new list
against its view, so subscribers get deltas, not a new snapshot); on a dropped connection
it re-watches from the last resourceVersion with exponential backoff. The socket loop
(`run`, `relist`, `watch_once`) is kept apart from the pure step (`handle_event`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson

from services.watcher import entries, ring
from services.watcher.metrics import Metrics
from splitsched.runtime import kubeclient
from splitsched.runtime.kubeclient import ApiError

log = logging.getLogger(__name__)

_TYPE_NAMES: dict[int, str] = {
    int(ring.ADDED): "ADDED",
    int(ring.MODIFIED): "MODIFIED",
    int(ring.DELETED): "DELETED",
}


class Gone(Exception):
    """410: the resourceVersion (or continue token) is too old; relist."""


@dataclass(frozen=True)
class Resource:
    name: str  # for logs and metrics: nodes, pods, poddisruptionbudgets, namespaces, ...
    kind: str  # ring.NODE / POD / PDB / NAMESPACE / PVC / PV / STORAGE_CLASS / CSI_NODE
    path: str
    params: tuple[tuple[str, str], ...] = ()
    namespaced: bool = True  # objects are keyed "namespace/name", else "name"
    #: Served by the API server only from some version on: a 404 to its LIST ("not served
    #: here") or a 403 (the watcher's role predates it) counts as synced with no objects,
    #: with a warning, and the LIST is tried again every `NOT_SERVED_RETRY` seconds (the
    #: API may be turned on, or the right granted, later).
    optional: bool = False


NODES = Resource("nodes", ring.NODE, "/api/v1/nodes", namespaced=False)
PODS = Resource(
    "pods",
    ring.POD,
    "/api/v1/pods",
    (("fieldSelector", "status.phase!=Succeeded,status.phase!=Failed"),),
)
PDBS = Resource("poddisruptionbudgets", ring.PDB, "/apis/policy/v1/poddisruptionbudgets")
NAMESPACES = Resource("namespaces", ring.NAMESPACE, "/api/v1/namespaces", namespaced=False)
#: What the volume plugins read.
STORAGE = (
    Resource("persistentvolumeclaims", ring.PVC, "/api/v1/persistentvolumeclaims"),
    Resource("persistentvolumes", ring.PV, "/api/v1/persistentvolumes", namespaced=False),
    Resource("storageclasses", ring.STORAGE_CLASS, "/apis/storage.k8s.io/v1/storageclasses",
             namespaced=False),
    Resource("csinodes", ring.CSI_NODE, "/apis/storage.k8s.io/v1/csinodes", namespaced=False),
)  # fmt: skip
#: What Dynamic Resource Allocation reads: resource.k8s.io/v1, served from Kubernetes 1.34.
DEVICES = (
    Resource("deviceclasses", ring.DEVICE_CLASS, "/apis/resource.k8s.io/v1/deviceclasses",
             namespaced=False, optional=True),
    Resource("resourceslices", ring.RESOURCE_SLICE, "/apis/resource.k8s.io/v1/resourceslices",
             namespaced=False, optional=True),
    Resource("resourceclaims", ring.RESOURCE_CLAIM, "/apis/resource.k8s.io/v1/resourceclaims",
             optional=True),
)  # fmt: skip
#: Seconds between LISTs of an optional resource the API server does not serve.
NOT_SERVED_RETRY = 60.0


class NotServed(Exception):
    """404 or 403 to the LIST of an optional resource: not served, or not to us."""


class Reflector:
    """LIST then WATCH one resource into the hub, forever (see the module docstring)."""

    def __init__(
        self,
        *,
        resource: Resource,
        hub: ring.ClusterHub,
        converter: entries.Converter,
        endpoint: kubeclient.KubeEndpoint,
        session: aiohttp.ClientSession,
        metrics: Metrics,
        page_size: int = 500,
        watch_timeout: int = 300,
        on_synced: Callable[[], None] | None = None,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
    ) -> None:
        self.resource = resource
        self.hub = hub
        self.converter = converter
        self.endpoint = endpoint
        self.session = session
        self.metrics = metrics
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.on_synced = on_synced
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.synced = False
        self.resource_version = ""
        self._unserved = False  # the last LIST of an optional resource was refused
        self._convert = {
            ring.NODE: converter.node,
            ring.POD: converter.pod,
            ring.PDB: converter.pdb,
            ring.NAMESPACE: converter.namespace,
            ring.PVC: converter.pvc,
            ring.PV: converter.pv,
            ring.STORAGE_CLASS: converter.storage_class,
            ring.CSI_NODE: converter.csi_node,
            ring.DEVICE_CLASS: converter.device_class,
            ring.RESOURCE_SLICE: converter.resource_slice,
            ring.RESOURCE_CLAIM: converter.resource_claim,
        }[resource.kind]

    @contextlib.asynccontextmanager
    async def _get(
        self, extra: dict[str, str], *, client_timeout: aiohttp.ClientTimeout | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A GET of the resource with `extra` query parameters, authenticated and verified
        as the endpoint says (the session's default timeout unless `client_timeout` is given)."""
        params = dict(self.resource.params)
        params.update(extra)
        options: dict[str, Any] = {
            "headers": self.endpoint.headers(),
            "server_hostname": self.endpoint.tls_server_name,
        }
        if client_timeout is not None:
            options["timeout"] = client_timeout
        url = self.endpoint.url(f"{self.resource.path}?{urlencode(params)}")
        async with self.session.get(url, **options) as response:
            yield response

    async def run(self) -> None:
        reason = "initial"
        backoff = self.backoff_initial
        while True:
            try:
                self.metrics.relists.labels(self.resource.name, reason).inc()
                await self.relist()
                backoff = self.backoff_initial
                if not self.synced:
                    self.synced = True
                    log.info("%s synced at resourceVersion %s", self.resource.name,
                             self.resource_version)  # fmt: skip
                    if self.on_synced:
                        self.on_synced()
                reason = await self.watch_loop()
            except asyncio.CancelledError:
                raise
            except NotServed as e:
                reason = await self._not_served(e.args[0])
            except Exception as e:
                reason = "error"
                log.warning("%s: list failed (%s); retrying in %.1fs", self.resource.name, e,
                            backoff)  # fmt: skip
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.backoff_max)

    async def _not_served(self, status: int) -> str:
        """An optional resource this API server does not serve, or not to us: synced,
        empty (what an earlier list showed is deleted downstream: the API was turned off or
        the right revoked), and asked for again later."""
        if not self._unserved:
            why = (
                "not served by this API server" if status == 404
                else "forbidden: the watcher's role lacks get/list/watch on it"
            )  # fmt: skip
            log.warning("%s: %s (%s); counted as none, listing again every %.0fs",
                        self.resource.name, why, self.resource.path, NOT_SERVED_RETRY)  # fmt: skip
            self._unserved = True
        self.hub.replace(self.resource.kind, [])
        if not self.synced:
            self.synced = True
            if self.on_synced:
                self.on_synced()
        await asyncio.sleep(NOT_SERVED_RETRY)
        return "not-served"

    async def relist(self) -> None:
        """A paginated LIST, then the hub diffs it against its view."""
        items: list[ring.Entry] = []
        cont = ""
        started = time.monotonic()
        while True:
            params = {"limit": str(self.page_size)}
            if cont:
                params["continue"] = cont
            async with self._get(params) as r:
                body = await r.read()
                if r.status == 410:
                    # The continue token expired: start over.
                    log.info("%s: continue token expired; listing again", self.resource.name)
                    items, cont = [], ""
                    continue
                if r.status in (403, 404) and self.resource.optional:
                    raise NotServed(r.status)
                if r.status != 200:
                    raise ApiError(r.status, body.decode(errors="replace"))
            doc = orjson.loads(body)
            now = time.time()
            for obj in doc.get("items") or []:
                entry = self._convert(obj, now)
                if entry is not None:
                    items.append(entry)
            meta = doc.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                self.resource_version = str(meta.get("resourceVersion") or "")
                break
        self._unserved = False
        counts = self.hub.replace(self.resource.kind, items)
        for t, n in counts.items():
            self.metrics.events.labels(self.resource.name, _TYPE_NAMES[t]).inc(n)
        log.info(
            "%s: listed %d in %.2fs at resourceVersion %s (deltas %s)",
            self.resource.name,
            len(items),
            time.monotonic() - started,
            self.resource_version,
            {_TYPE_NAMES[t]: n for t, n in counts.items()},
        )

    async def watch_loop(self) -> str:
        """Watch until a 410 (returns the relist reason); reconnect on errors."""
        backoff = self.backoff_initial
        while True:
            try:
                got_events = await self.watch_once()
                if got_events:
                    backoff = self.backoff_initial
                continue  # a normal server-side timeout: watch again from the last rv
            except Gone:
                log.info("%s: resourceVersion %s is gone; relisting", self.resource.name,
                         self.resource_version)  # fmt: skip
                return "gone"
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, OSError, TimeoutError, ApiError, ValueError) as e:
                log.warning("%s: watch broke (%s); re-watching from %s in %.1fs",
                            self.resource.name, e or type(e).__name__, self.resource_version,
                            backoff)  # fmt: skip
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.backoff_max)

    async def watch_once(self) -> bool:
        params = {
            "watch": "1",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_timeout),
        }
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=10, sock_read=self.watch_timeout + 30
        )
        got = False
        async with self._get(params, client_timeout=timeout) as r:
            if r.status == 410:
                raise Gone()
            if r.status != 200:
                raise ApiError(r.status, (await r.read()).decode(errors="replace"))
            async for event in kubeclient.json_lines(r):
                self.handle_event(event)
                got = True
        return got

    def handle_event(self, event: dict[str, Any]) -> None:
        type_ = event.get("type")
        obj = event.get("object") or {}
        if type_ == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone()
            raise ApiError(int(code or 0), str(obj.get("message")))
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if type_ == "BOOKMARK":
            if rv:
                self.resource_version = str(rv)
            return
        now = time.time()
        kind = self.resource.kind
        result: int | None
        if type_ == "DELETED":
            entry = self._safe_convert(obj, now)
            key = self._key(meta)
            result = self.hub.delete(kind, key, entry)
        elif type_ == "MODIFIED" and self._unchanged_pod(obj, meta):
            self.hub.absorb(kind, self._key(meta), str(rv or ""))
            self.metrics.absorbed.labels(self.resource.name).inc()
            result = None
        elif type_ in ("ADDED", "MODIFIED"):
            entry = self._safe_convert(obj, now)
            if entry is None:
                # Terminal, filtered out or unreadable: it leaves the view.
                result = self.hub.delete(kind, self._key(meta))
            else:
                absorbed = self.hub.absorbed
                result = self.hub.upsert(entry)
                if self.hub.absorbed != absorbed:
                    self.metrics.absorbed.labels(self.resource.name).inc()
        else:
            log.warning("%s: unknown watch event type %r", self.resource.name, type_)
            return
        if rv:
            self.resource_version = str(rv)
        if result is not None:
            self.metrics.events.labels(self.resource.name, _TYPE_NAMES[result]).inc()

    def _unchanged_pod(self, obj: dict[str, Any], meta: dict[str, Any]) -> bool:
        """Whether this pod update changes nothing a scheduler reads, judged on the JSON
        against the version in view (most updates after a bind are status only)."""
        if self.resource.kind != ring.POD:
            return False
        old = self.hub.get(ring.POD, self._key(meta))
        return (
            old is not None
            and bool(old.raw_fingerprint)
            and old.uid == meta.get("uid")
            and old.raw_fingerprint == entries.raw_pod_fingerprint(obj)
        )

    def _key(self, meta: dict[str, Any]) -> str:
        name = str(meta.get("name") or "")
        if not self.resource.namespaced:
            return name
        return f"{meta.get('namespace') or 'default'}/{name}"

    def _safe_convert(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        try:
            return self._convert(obj, now)
        except Exception:
            log.exception(
                "%s: cannot convert %s", self.resource.name, self._key(obj.get("metadata") or {})
            )
            return None
