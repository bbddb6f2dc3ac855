"""List+watch of Nodes, Pods and PodDisruptionBudgets against the API server, into a hub.

Called by `services.watcher.main`. Talks raw HTTP through aiohttp with the kubeconfig's (or
the in-cluster) TLS material and token, and decodes JSON with orjson: the official client's
model classes cost milliseconds per object. Each object is converted once
(`splitsched.core.convert` -> `splitsched.wire` -> serialised event body) and handed to
`ClusterHub`.

Per resource, a `Reflector` runs: a paginated LIST (`limit`/`continue`), then WATCH from the
list's resourceVersion with bookmarks; on 410 Gone it relists (the hub diffs the new list
against its view, so subscribers get deltas, not a new snapshot); on a dropped connection
it re-watches from the last resourceVersion with exponential backoff.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson
from prometheus_client import CollectorRegistry, Counter

from services.watcher import ring
from splitsched import wire
from splitsched.core import models
from splitsched.core.convert import ConversionError, node_from_k8s, pod_from_k8s
from splitsched.runtime import kubeclient, tracing
from splitsched.v1 import types_pb2

log = logging.getLogger(__name__)

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_TYPE_NAMES: dict[int, str] = {
    int(ring.ADDED): "ADDED",
    int(ring.MODIFIED): "MODIFIED",
    int(ring.DELETED): "DELETED",
}


class Gone(Exception):
    """410: the resourceVersion (or continue token) is too old; relist."""


class ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


# ---- API access -----------------------------------------------------------------------


@dataclass
class KubeAccess:
    """Server URL, TLS context and a token source, from a kubeconfig or the pod's
    service account. The token is re-read for every request (rotated SA tokens)."""

    host: str
    ssl_context: ssl.SSLContext | bool
    token: Callable[[], str | None]

    @classmethod
    def load(cls, kubeconfig: str | None) -> KubeAccess:
        from kubernetes import client as kclient
        from kubernetes import config as kconfig

        cfg = kclient.Configuration()
        if kubeconfig:
            kconfig.load_kube_config(
                config_file=kubeconfig, client_configuration=cfg, persist_config=False
            )
        else:
            kconfig.load_incluster_config(client_configuration=cfg)
        ctx: ssl.SSLContext | bool
        if cfg.verify_ssl:
            ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
            if not cfg.assert_hostname and cfg.assert_hostname is not None:
                ctx.check_hostname = False
        else:
            ctx = False
        if cfg.cert_file:
            if ctx is False:
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            assert isinstance(ctx, ssl.SSLContext)
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)

        def token() -> str | None:
            value = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix(
                "authorization"
            )
            return str(value) if value else None

        return cls(host=str(cfg.host).rstrip("/"), ssl_context=ctx, token=token)

    def headers(self) -> dict[str, str]:
        h = {"Accept": "application/json"}
        tok = self.token()
        if tok:
            h["Authorization"] = kubeclient.bearer_authorization(tok)
        return h


# ---- conversion into hub entries ------------------------------------------------------


def _rfc3339(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


class Converter:
    """API JSON -> hub entries, applying the watcher-level scheduler-name filter."""

    def __init__(self, *, scheduler_names: Iterable[str] = ()) -> None:
        self.scheduler_names = frozenset(n for n in scheduler_names if n)

    def pod(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        """None when the pod does not belong in the view (terminal, or pending for a
        scheduler we don't serve)."""
        pod = pod_from_k8s(obj, strict=False)
        if pod.phase in TERMINAL_PHASES:
            return None
        if (
            self.scheduler_names
            and not pod.node_name
            and pod.scheduler_name not in self.scheduler_names
        ):
            return None
        if pod.invalid_reason:
            log.warning("pod %s is malformed: %s", pod.key, pod.invalid_reason)
        deletion = None
        if pod.deleting:
            deletion = _rfc3339(obj["metadata"].get("deletionTimestamp"))
        msg = wire.pod_to_proto(pod, deletion_timestamp=deletion)
        fingerprint = _fingerprint(msg)
        carrier = None
        if not pod.node_name and not pod.deleting and tracing.enabled():
            carrier = _observe_pending(pod, now)
        return ring.Entry(
            kind=ring.POD,
            key=pod.key,
            uid=pod.uid,
            resource_version=pod.resource_version,
            body=ring.encode_body(msg, observed_at=now, trace_context=carrier),
            scheduler_name=pod.scheduler_name,
            assigned=bool(pod.node_name),
            fingerprint=fingerprint,
            raw_fingerprint=raw_pod_fingerprint(obj),
        )

    def node(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        try:
            node = node_from_k8s(obj)
        except ConversionError as e:
            log.error("skipping node that cannot be read: %s", e)
            return None
        msg = wire.node_to_proto(node)
        return ring.Entry(
            kind=ring.NODE,
            key=node.name,
            uid=node.uid,
            resource_version=node.resource_version,
            body=ring.encode_body(msg, observed_at=now),
            fingerprint=_fingerprint(msg),
        )

    def pdb(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        try:
            msg = pdb_to_proto(obj)
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            log.error("skipping PodDisruptionBudget that cannot be read: %s", e)
            return None
        return ring.Entry(
            kind=ring.PDB,
            key=f"{msg.namespace}/{msg.name}",
            uid=str(obj["metadata"].get("uid") or ""),
            resource_version=msg.resource_version,
            body=ring.encode_body(msg, observed_at=now),
        )


def raw_pod_fingerprint(obj: dict[str, Any]) -> bytes:
    """Everything `pod_from_k8s` reads of a pod except its identity and resourceVersion,
    serialised: equal for two versions whose conversions are equal but for the
    resourceVersion and a non-terminal phase, so the second needs no conversion (a
    fraction of its cost). b"" for a terminal pod (it must be converted: it leaves the view)."""
    status = obj.get("status") or {}
    phase = status.get("phase") if isinstance(status, dict) else None
    if phase in TERMINAL_PHASES or not isinstance(status, dict):
        return b""
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        return b""
    try:
        return orjson.dumps(
            (
                meta.get("labels"),
                meta.get("annotations"),
                meta.get("ownerReferences"),
                meta.get("deletionTimestamp"),
                meta.get("creationTimestamp"),
                obj.get("spec"),
                status.get("nominatedNodeName"),
            )
        )
    except orjson.JSONEncodeError:
        return b""


def _fingerprint(msg: types_pb2.Pod | types_pb2.Node) -> bytes:
    """The object's bytes without its resourceVersion and, for a pod, its phase (terminal
    pods leave the view, so the phase only tells Pending from Running). After a bind, the
    pod updates that follow (kwok or the kubelet starting it) change nothing else a
    scheduler reads: with this they cost the watcher one serialisation and the scheduler
    nothing."""
    version, msg.resource_version = msg.resource_version, ""
    phase = ""
    if isinstance(msg, types_pb2.Pod):
        phase, msg.phase = msg.phase, ""
    data = msg.SerializeToString(deterministic=True)
    msg.resource_version = version
    if isinstance(msg, types_pb2.Pod):
        msg.phase = phase
    return data


def _observe_pending(pod: models.Pod, now: float) -> dict[str, str]:
    """The `watch_event` span that starts a pending pod's scheduling trace; its context
    rides on the ClusterEvent to the scheduler."""
    attrs = tracing.pod_attributes(pod.namespace, pod.name, pod.uid)
    attrs["splitsched.profile"] = pod.scheduler_name
    attrs["splitsched.resource_version"] = pod.resource_version
    return tracing.producer_span("watch_event", attributes=attrs, at=now)


def _label_selector(sel: object, out: types_pb2.LabelSelector) -> None:
    if not isinstance(sel, dict):
        raise TypeError(f"selector: expected an object, got {type(sel).__name__}")
    out.SetInParent()
    labels = sel.get("matchLabels") or {}
    for k, v in labels.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("selector.matchLabels: expected strings")
        out.match_labels[k] = v
    for req in sel.get("matchExpressions") or []:
        out.match_expressions.add(
            key=str(req["key"]),
            operator=str(req["operator"]),
            values=[str(v) for v in req.get("values") or []],
        )


def pdb_to_proto(obj: dict[str, Any]) -> types_pb2.PodDisruptionBudget:
    """A policy/v1 PodDisruptionBudget's scheduling-relevant part (preemption reads it)."""
    meta = obj["metadata"]
    msg = types_pb2.PodDisruptionBudget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        resource_version=str(meta.get("resourceVersion") or ""),
    )
    spec = obj.get("spec") or {}
    if spec.get("selector") is not None:
        _label_selector(spec["selector"], msg.selector)
    allowed = (obj.get("status") or {}).get("disruptionsAllowed", 0)
    if type(allowed) is not int:
        raise TypeError(f"status.disruptionsAllowed: expected an integer, got {allowed!r}")
    msg.disruptions_allowed = allowed
    return msg


# ---- reflectors -----------------------------------------------------------------------


@dataclass(frozen=True)
class Resource:
    name: str  # for logs and metrics: nodes, pods, poddisruptionbudgets
    kind: str  # ring.NODE / POD / PDB
    path: str
    params: tuple[tuple[str, str], ...] = ()


NODES = Resource("nodes", ring.NODE, "/api/v1/nodes")
PODS = Resource(
    "pods",
    ring.POD,
    "/api/v1/pods",
    (("fieldSelector", "status.phase!=Succeeded,status.phase!=Failed"),),
)
PDBS = Resource("poddisruptionbudgets", ring.PDB, "/apis/policy/v1/poddisruptionbudgets")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.events = Counter(
            "splitsched_watcher_events",
            "Deltas emitted to subscribers, by resource and type",
            ["resource", "type"],
            registry=registry,
        )
        self.absorbed = Counter(
            "splitsched_watcher_absorbed_updates",
            "Updates taken into the view without a delta: only status a scheduler ignores changed",
            ["resource"],
            registry=registry,
        )
        self.relists = Counter(
            "splitsched_watcher_relists",
            "LISTs of a resource, by reason (initial, gone, error)",
            ["resource", "reason"],
            registry=registry,
        )


class Reflector:
    """LIST then WATCH one resource into the hub, forever (see the module docstring)."""

    def __init__(
        self,
        *,
        resource: Resource,
        hub: ring.ClusterHub,
        converter: Converter,
        access: KubeAccess,
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
        self.access = access
        self.session = session
        self.metrics = metrics
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.on_synced = on_synced
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.synced = False
        self.resource_version = ""
        self._convert = {
            ring.NODE: converter.node,
            ring.POD: converter.pod,
            ring.PDB: converter.pdb,
        }[resource.kind]

    def _url(self, extra: dict[str, str]) -> str:
        params = dict(self.resource.params)
        params.update(extra)
        return f"{self.access.host}{self.resource.path}?{urlencode(params)}"

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
            except Exception as e:
                reason = "error"
                log.warning("%s: list failed (%s); retrying in %.1fs", self.resource.name, e,
                            backoff)  # fmt: skip
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.backoff_max)

    async def relist(self) -> None:
        """A paginated LIST, then the hub diffs it against its view."""
        items: list[ring.Entry] = []
        cont = ""
        started = time.monotonic()
        while True:
            params = {"limit": str(self.page_size)}
            if cont:
                params["continue"] = cont
            async with self.session.get(self._url(params), headers=self.access.headers()) as r:
                body = await r.read()
                if r.status == 410:
                    # The continue token expired: start over.
                    log.info("%s: continue token expired; listing again", self.resource.name)
                    items, cont = [], ""
                    continue
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
        async with self.session.get(
            self._url(params), headers=self.access.headers(), timeout=timeout
        ) as r:
            if r.status == 410:
                raise Gone()
            if r.status != 200:
                raise ApiError(r.status, (await r.read()).decode(errors="replace"))
            buf = b""
            async for chunk in r.content.iter_any():
                buf += chunk
                if b"\n" not in buf:
                    continue
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.strip():
                        self.handle_event(orjson.loads(line))
                        got = True
            if buf.strip():
                self.handle_event(orjson.loads(buf))
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
            and old.raw_fingerprint == raw_pod_fingerprint(obj)
        )

    def _key(self, meta: dict[str, Any]) -> str:
        name = str(meta.get("name") or "")
        if self.resource.kind == ring.NODE:
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
