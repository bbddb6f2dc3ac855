"""The Scheduler API's input: requests checked and turned into models before anything
reads the view.

Paging tokens (a keyset plus the filters they were issued for), the limits a request must
keep, binders' outcome codes, and Simulate's pods from proto messages or from manifests
(YAML or JSON, with every error naming the request field). Pure: the manifest parsing runs
in a worker thread, off the scheduler's loop. Used by `services.scheduler.api`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Mapping, Sequence

import yaml

from services.scheduler import podcheck
from services.scheduler.state import Outcome
from splitsched import wire
from splitsched.core import convert, models
from splitsched.v1 import scheduler_pb2, types_pb2

MAX_PAGE = 5000
DEFAULT_PAGE = 500
MAX_SIMULATE_PODS = 1000
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
DEFAULT_TOP_NODES = 3
MAX_TOP_NODES = 50

_OUTCOME_FROM_PROTO = {
    scheduler_pb2.BindingOutcome.BOUND: Outcome.BOUND,
    scheduler_pb2.BindingOutcome.CONFLICT: Outcome.CONFLICT,
    scheduler_pb2.BindingOutcome.POD_GONE: Outcome.POD_GONE,
    scheduler_pb2.BindingOutcome.FAILED: Outcome.FAILED,
    scheduler_pb2.BindingOutcome.DEADLINE_EXCEEDED: Outcome.DEADLINE_EXCEEDED,
    scheduler_pb2.BindingOutcome.IN_PROGRESS: Outcome.IN_PROGRESS,
}


def outcome_from_proto(result: scheduler_pb2.BindingOutcome.Result.ValueType) -> Outcome | None:
    """A binder's BindingOutcome.Result; None for one this scheduler does not know."""
    return _OUTCOME_FROM_PROTO.get(result)


class InvalidRequest(ValueError):
    """The request cannot be answered as given; the message names the field."""


# ---- paging -----------------------------------------------------------------------------
# A page token names the last item of the previous page (a keyset, not an offset), so pods
# created or deleted between two pages neither shift nor repeat the others, plus the filters
# it was issued for, so it cannot be replayed against a different query.


def page_token(*, query: str, last: Sequence[str]) -> str:
    raw = json.dumps({"q": query, "after": list(last)}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def page_after(token: str, *, query: str, key_len: int) -> tuple[str, ...] | None:
    """The key a page starts after; None for the first page. Raises InvalidRequest."""
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest("page_token: not a token this server issued") from None
    after = doc.get("after") if isinstance(doc, dict) else None
    if (
        not isinstance(after, list)
        or len(after) != key_len
        or not all(isinstance(k, str) for k in after)
    ):
        raise InvalidRequest("page_token: not a token this server issued")
    if doc.get("q") != query:
        raise InvalidRequest("page_token: issued for different filters; keep them unchanged")
    return tuple(after)


def page_size(requested: int) -> int:
    if requested < 0:
        raise InvalidRequest("page_size: must not be negative")
    return min(requested or DEFAULT_PAGE, MAX_PAGE)


def simulate_limits(request: scheduler_pb2.SimulateRequest) -> int:
    """The request within Simulate's limits (checked before any parsing); the number of
    top nodes to show per pod. Raises InvalidRequest."""
    if not 0 <= request.top_nodes <= MAX_TOP_NODES:
        raise InvalidRequest(f"top_nodes: must be 0..{MAX_TOP_NODES}")
    if len(request.pods) > MAX_SIMULATE_PODS:
        raise InvalidRequest(f"pods: at most {MAX_SIMULATE_PODS} pods per Simulate call")
    size = sum(len(m) for m in request.manifests)
    if size > MAX_MANIFEST_BYTES:
        raise InvalidRequest(
            f"manifests: {size} bytes in total; at most {MAX_MANIFEST_BYTES} per call"
        )
    return request.top_nodes or DEFAULT_TOP_NODES


# ---- Simulate's input -------------------------------------------------------------------


class _NoAliasCheck:
    """YAML aliases (`*ref`, `<<: *ref`) make the loader share one dict or list between
    several places; refusing shared containers refuses aliases (and "billion laughs")."""

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def check(self, value: object) -> None:
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, (dict, list)):
                if id(item) in self.seen:
                    raise InvalidRequest("YAML aliases (*ref) are not supported")
                self.seen.add(id(item))
                stack.extend(item.values() if isinstance(item, dict) else item)


def _documents(text: str) -> list[object]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(stripped)]
        except ValueError:
            pass  # maybe YAML flow style after all; the YAML parser says what is wrong
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError as exc:
        raise InvalidRequest(f"not valid YAML or JSON: {exc}") from None
    checker = _NoAliasCheck()
    for doc in docs:
        checker.check(doc)
    return docs


def _manifest_items(text: str) -> list[tuple[str, object]]:
    """(where, object) for every pod-ish object of one manifest string."""
    docs = _documents(text)
    out: list[tuple[str, object]] = []
    for d, doc in enumerate(docs):
        where = f"document {d}: " if len(docs) > 1 else ""
        if isinstance(doc, dict) and doc.get("kind") in ("List", "PodList"):
            items = doc.get("items")
            if not isinstance(items, list):
                raise InvalidRequest(f"{where}items: expected a list")
            out += [(f"{where}items[{j}]: ", item) for j, item in enumerate(items)]
        else:
            out.append((where, doc))
    return out


class _SimulatedPods:
    """Simulate's pods as they are read, checked one by one, with fresh uids."""

    def __init__(self, profiles: Sequence[str]) -> None:
        self.profiles = profiles
        self.pods: list[models.Pod] = []

    @property
    def next_name(self) -> str:
        return f"simulated-{len(self.pods)}"

    def add(self, pod: models.Pod, where: str) -> None:
        if len(self.pods) >= MAX_SIMULATE_PODS:
            raise InvalidRequest(f"at most {MAX_SIMULATE_PODS} pods per Simulate call")
        if pod.invalid_reason:
            raise InvalidRequest(f"{where}pod {pod.key}: {pod.invalid_reason}")
        problem = podcheck.resource_problem(pod)
        if problem:
            raise InvalidRequest(f"{where}pod {pod.key}: {problem}")
        if pod.scheduler_name not in self.profiles:
            raise InvalidRequest(
                f"{where}pod {pod.key}: spec.schedulerName: {pod.scheduler_name!r} is not a "
                f"profile of this scheduler ({', '.join(self.profiles)})"
            )
        uid = f"simulate-{len(self.pods)}-{pod.uid or pod.name}"
        self.pods.append(dataclasses.replace(pod, uid=uid, node_name=""))


def simulated_pods(
    request: scheduler_pb2.SimulateRequest, *, profiles: Sequence[str]
) -> list[models.Pod]:
    """The pods of a Simulate request as models, validated, with the defaults the contract
    promises. Pure (no view access): runs in a worker thread. Raises InvalidRequest."""
    default_profile = profiles[0]
    out = _SimulatedPods(profiles)
    for i, msg in enumerate(request.pods):
        where = f"pods[{i}]: "
        _check_proto_pod(msg, where)
        pod = wire.pod_from_proto(msg)
        pod = dataclasses.replace(
            pod,
            namespace=pod.namespace or "default",
            name=pod.name or out.next_name,
            scheduler_name=pod.scheduler_name or default_profile,
        )
        out.add(pod, where)
    for i, text in enumerate(request.manifests):
        try:
            items = _manifest_items(text)
        except InvalidRequest as exc:
            raise InvalidRequest(f"manifests[{i}]: {exc}") from None
        for item_where, item in items:
            where = f"manifests[{i}]: {item_where}"
            out.add(_manifest_pod(item, where, out.next_name, default_profile), where)
    if not out.pods:
        raise InvalidRequest("pods, manifests: give at least one pod")
    return out.pods


def _manifest_pod(item: object, where: str, name: str, default_profile: str) -> models.Pod:
    """One Pod object of a manifest as a model, named `name` if it has none."""
    if not isinstance(item, dict):
        raise InvalidRequest(f"{where}expected a Pod object")
    kind = item.get("kind", "Pod")
    if kind != "Pod":
        raise InvalidRequest(f"{where}kind: expected Pod, got {kind!r}")
    meta = item.setdefault("metadata", {})
    if isinstance(meta, dict) and not meta.get("name"):
        meta["name"] = name
    spec = item.get("spec")
    if isinstance(spec, dict) and not spec.get("schedulerName"):
        spec["schedulerName"] = default_profile
    try:
        return convert.pod_from_k8s(item, strict=True)
    except ValueError as exc:  # ConversionError: "pod ns/name: field.path: problem"
        raise InvalidRequest(f"{where}{exc}") from None


def _check_proto_pod(msg: types_pb2.Pod, where: str) -> None:
    """What the API server or the watcher's converter would have refused: negative
    quantities, and what `podcheck` checks."""
    lists: list[tuple[str, Mapping[str, int]]] = [
        ("overhead", msg.overhead),
        ("pod_requests", msg.pod_requests),
    ]
    for field_name, containers in (
        ("containers", msg.containers),
        ("init_containers", msg.init_containers),
    ):
        lists += [(f"{field_name}[{j}].requests", c.requests) for j, c in enumerate(containers)]
    for path, resources in lists:
        for resource, amount in resources.items():
            if amount < 0:
                raise InvalidRequest(f"{where}{path}[{resource!r}]: must not be negative")
    problem = podcheck.problem(msg)
    if problem:
        raise InvalidRequest(f"{where}{problem}")
