"""Kubernetes API JSON (camelCase dicts) -> `models.Node` / `models.Pod`, and cluster files.

Called by the watcher once per list item and watch event (`node_from_k8s`, `pod_from_k8s`
with strict=False), and by tools and tests that load a cluster from what
`kubectl get nodes,pods -A -o yaml` prints (`load_cluster`).

Hot path: thousands of events per second, so it reads only the fields scheduling needs,
makes no deep copies (label, annotation and nodeSelector maps of the input are kept by
reference: callers must not mutate the input afterwards), and parses quantities through
`quantity.canonical_amount`'s cache. Kubernetes' defaulting that scheduling depends on is
mirrored so hand-written objects behave like stored ones: requests default to limits per
resource, hostNetwork ports default hostPort to containerPort, toleration operator Equal,
topology spread policies Honor/Ignore.

Every error names the object and the field path:
`pod default/web: spec.containers[1].resources.requests.memory: invalid quantity '12XB'`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, date, datetime
from typing import Any, TypeVar

import yaml

from splitsched.core import models
from splitsched.core.quantity import QuantityError, canonical_amount

__all__ = ["ConversionError", "load_cluster", "node_from_k8s", "pod_from_k8s"]

_YamlLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_MIN_MEMBER = "scheduling.x-k8s.io/min-member"
GROUP_ANNOTATION = "splitsched.io/group"
MIN_MEMBER_ANNOTATION = "splitsched.io/min-member"

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_NODE_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_LABEL_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_TOLERATION_OPS = frozenset({"Equal", "Exists"})
_TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
_TOLERATION_EFFECTS = _TAINT_EFFECTS | {""}
_WHEN_UNSATISFIABLE = frozenset({"DoNotSchedule", "ScheduleAnyway"})
_POLICIES = frozenset({"Honor", "Ignore"})
_PREEMPTION_POLICIES = frozenset({"PreemptLowerPriority", "Never"})
_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})


_T = TypeVar("_T")
_UNSET: Any = object()


def _fast_constructor(cls: type[_T]) -> Callable[..., _T]:
    """A keyword-only constructor for a frozen, slotted dataclass that fills the slots
    directly: Python 3.11's frozen __init__ goes through object.__setattr__ per field and
    costs about four times as much, which dominated pod conversion. Generated from
    dataclasses.fields, so it follows model changes; classes without slots or with a
    __post_init__ keep their own constructor."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        return cls
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_UNSET": _UNSET}
    params: list[str] = []
    body: list[str] = ["    self = _new(_cls)"]
    for f in fields:
        name = f.name
        namespace[f"_set_{name}"] = cls.__dict__[name].__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = f.default
            default = f"_default_{name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = f.default_factory
            default = "_UNSET"
        else:
            default = ""
        if not f.init:
            value = f"_factory_{name}()" if default == "_UNSET" else default
            body.append(f"    _set_{name}(self, {value})")
            continue
        params.append(f"{name}={default}" if default else name)
        if default == "_UNSET":
            body.append(f"    if {name} is _UNSET: {name} = _factory_{name}()")
        body.append(f"    _set_{name}(self, {name})")
    source = f"def make(*, {', '.join(params)}):\n" + "\n".join(body) + "\n    return self\n"
    exec(source, namespace)
    maker: Callable[..., _T] = namespace["make"]
    return maker


_Pod = _fast_constructor(models.Pod)
_Container = _fast_constructor(models.Container)
_HostPort = _fast_constructor(models.HostPort)
_Toleration = _fast_constructor(models.Toleration)
_Spread = _fast_constructor(models.TopologySpreadConstraint)
_LabelSelector = _fast_constructor(models.LabelSelector)
_LabelRequirement = _fast_constructor(models.LabelSelectorRequirement)
_NodeRequirement = _fast_constructor(models.NodeSelectorRequirement)
_NodeSelectorTerm = _fast_constructor(models.NodeSelectorTerm)
_PreferredTerm = _fast_constructor(models.PreferredSchedulingTerm)
_NodeAffinity = _fast_constructor(models.NodeAffinity)
_PodAffinityTerm = _fast_constructor(models.PodAffinityTerm)
_WeightedTerm = _fast_constructor(models.WeightedPodAffinityTerm)
_PodAffinity = _fast_constructor(models.PodAffinity)
_OwnerRef = _fast_constructor(models.OwnerRef)
_PodGroupRef = _fast_constructor(models.PodGroupRef)
_Taint = _fast_constructor(models.Taint)
_Node = _fast_constructor(models.Node)


class ConversionError(ValueError):
    """An API object that cannot be converted. `object_ref` is e.g. "pod default/web",
    `detail` the field path and problem ("spec.priority: expected an integer, got 'x'")."""

    def __init__(self, object_ref: str, detail: str) -> None:
        self.object_ref = object_ref
        self.detail = detail
        super().__init__(f"{object_ref}: {detail}" if object_ref else detail)


class _Bad(Exception):
    """Raised inside the converters; turned into ConversionError with the object's name."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(path, problem)
        self.path = path
        self.problem = problem

    @property
    def detail(self) -> str:
        return f"{self.path}: {self.problem}" if self.path else self.problem


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"number {_show(value)}"
    if isinstance(value, str):
        return f"string {_show(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# ---- small typed readers --------------------------------------------------------------


def _obj(value: object, path: str) -> dict[str, Any]:
    """An optional object: absent/null -> {}."""
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    raise _Bad(path, f"expected an object, got {_type_name(value)}")


def _list(value: object, path: str) -> list[Any]:
    if isinstance(value, list):
        return value
    if value is None:
        return []
    raise _Bad(path, f"expected a list, got {_type_name(value)}")


def _str(value: object, path: str, default: str = "") -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return default
    raise _Bad(path, f"expected a string, got {_type_name(value)}")


def _int(value: object, path: str, *, low: int, high: int) -> int:
    if type(value) is not int:  # bools and floats are not integers here
        raise _Bad(path, f"expected an integer, got {_type_name(value)}")
    if not low <= value <= high:
        raise _Bad(path, f"{value} is out of range [{low}, {high}]")
    return value


def _bool(value: object, path: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise _Bad(path, f"expected a boolean, got {_type_name(value)}")


def _enum(value: object, path: str, allowed: frozenset[str], default: str) -> str:
    if value is None:
        return default
    if isinstance(value, str) and value in allowed:
        return value
    raise _Bad(path, f"unsupported value {_show(value)}: expected one of {sorted(allowed)}")


def _str_map(value: object, path: str) -> dict[str, str]:
    """A map of strings, returned as is (no copy)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Bad(path, f"expected a map of strings, got {_type_name(value)}")
    for key, item in value.items():
        if not isinstance(item, str) or not isinstance(key, str):
            raise _Bad(f"{path}[{key}]", f"expected a string, got {_type_name(item)}")
    return value


def _str_tuple(value: object, path: str) -> tuple[str, ...]:
    items = _list(value, path)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise _Bad(f"{path}[{i}]", f"expected a string, got {_type_name(item)}")
    return tuple(items)


def _resources(value: object, path: str) -> dict[str, int]:
    """A ResourceList ({"cpu": "100m", ...}) in canonical integers."""
    if value is None or (isinstance(value, dict) and not value):
        return {}
    if not isinstance(value, dict):
        raise _Bad(path, f"expected a map of quantities, got {_type_name(value)}")
    out: dict[str, int] = {}
    for name, amount in value.items():
        if not isinstance(name, str) or not name:
            raise _Bad(path, f"invalid resource name {_show(name)}")
        try:
            out[name] = canonical_amount(name, amount, field="")
        except QuantityError as e:
            raise _Bad(f"{path}.{name}", e.reason) from None
    return out


def _requests_with_limits(value: object, path: str) -> dict[str, int]:
    """requests, with each resource that only has a limit defaulted to that limit
    (SetDefaults_Pod)."""
    res = _obj(value, path)
    if not res:
        return {}
    try:
        requests = _resources(res.get("requests"), "requests")
        raw_limits = res.get("limits")
        if raw_limits:
            for name, amount in _resources(raw_limits, "limits").items():
                if name not in requests:
                    requests[name] = amount
    except _Bad as e:
        raise _within(e, path) from None
    return requests


def _timestamp(value: object, path: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise _Bad(path, f"invalid RFC3339 timestamp {_show(value)}") from None
    elif isinstance(value, datetime):  # unquoted timestamps in hand-written YAML
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    else:
        raise _Bad(path, f"expected an RFC3339 timestamp, got {_type_name(value)}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


# ---- selectors and affinity -------------------------------------------------------------
# Nested readers use paths relative to their own object; callers prefix them with `_within`
# only when an error propagates, so the happy path builds no path strings.


def _within(error: _Bad, prefix: str) -> _Bad:
    """`error` re-rooted under `prefix` ("spec.tolerations[1]" + "operator")."""
    path = error.path
    if not path:
        joined = prefix
    elif path[0] == "[":
        joined = prefix + path
    else:
        joined = f"{prefix}.{path}"
    return _Bad(joined, error.problem)


def _requirements(
    value: object, path: str, ops: frozenset[str], make: Callable[..., Any]
) -> tuple[Any, ...]:
    out = []
    for i, raw in enumerate(_list(value, path)):
        if not isinstance(raw, dict):
            raise _Bad(f"{path}[{i}]", f"expected an object, got {_type_name(raw)}")
        key = raw.get("key")
        if not isinstance(key, str) or not key:
            raise _Bad(
                f"{path}[{i}].key", "required" if key is None else "expected a non-empty string"
            )
        op = raw.get("operator")
        if not isinstance(op, str) or op not in ops:
            raise _Bad(f"{path}[{i}].operator", f"unsupported operator {_show(op)}")
        values = raw.get("values")
        out.append(
            make(
                key=key,
                operator=op,
                values=_str_tuple(values, f"{path}[{i}].values") if values else (),
            )
        )
    return tuple(out)


def _node_selector_term(value: object) -> models.NodeSelectorTerm:
    term = _obj(value, "")
    exprs = term.get("matchExpressions")
    fields = term.get("matchFields")
    return _NodeSelectorTerm(
        match_expressions=_requirements(
            exprs, "matchExpressions", _NODE_SELECTOR_OPS, _NodeRequirement
        )
        if exprs
        else (),
        match_fields=_requirements(fields, "matchFields", _NODE_SELECTOR_OPS, _NodeRequirement)
        if fields
        else (),
    )


def _node_affinity(value: object) -> models.NodeAffinity | None:
    if value is None:
        return None
    na = _obj(value, "")
    required: tuple[models.NodeSelectorTerm, ...] | None = None
    raw_required = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw_required is not None:
        rpath = "requiredDuringSchedulingIgnoredDuringExecution"
        terms = _list(
            _obj(raw_required, rpath).get("nodeSelectorTerms"), f"{rpath}.nodeSelectorTerms"
        )
        out = []
        for i, t in enumerate(terms):
            try:
                out.append(_node_selector_term(t))
            except _Bad as e:
                raise _within(e, f"{rpath}.nodeSelectorTerms[{i}]") from None
        required = tuple(out)
    preferred = []
    ppath = "preferredDuringSchedulingIgnoredDuringExecution"
    for i, raw in enumerate(_list(na.get(ppath), ppath)):
        try:
            item = _obj(raw, "")
            preferred.append(
                _PreferredTerm(
                    weight=_int(item.get("weight"), "weight", low=0, high=100),
                    preference=_node_selector_term(item.get("preference")),
                )
            )
        except _Bad as e:
            raise _within(e, f"{ppath}[{i}]") from None
    return _NodeAffinity(required=required, preferred=tuple(preferred))


def _label_selector(value: object) -> models.LabelSelector | None:
    """None stays None (matches nothing where the API allows a null selector)."""
    if value is None:
        return None
    sel = _obj(value, "")
    labels = sel.get("matchLabels")
    exprs = sel.get("matchExpressions")
    return _LabelSelector(
        match_labels=tuple(_str_map(labels, "matchLabels").items()) if labels else (),
        match_expressions=_requirements(
            exprs, "matchExpressions", _LABEL_SELECTOR_OPS, _LabelRequirement
        )
        if exprs
        else (),
    )


def _selector_at(value: object, path: str) -> models.LabelSelector | None:
    try:
        return _label_selector(value)
    except _Bad as e:
        raise _within(e, path) from None


def _pod_affinity_term(value: object) -> models.PodAffinityTerm:
    term = _obj(value, "")
    topology_key = _str(term.get("topologyKey"), "topologyKey")
    if not topology_key:
        raise _Bad("topologyKey", "required")
    namespaces = term.get("namespaces")
    match_keys = term.get("matchLabelKeys")
    mismatch_keys = term.get("mismatchLabelKeys")
    return _PodAffinityTerm(
        label_selector=_selector_at(term.get("labelSelector"), "labelSelector"),
        topology_key=topology_key,
        namespaces=_str_tuple(namespaces, "namespaces") if namespaces else (),
        namespace_selector=_selector_at(term.get("namespaceSelector"), "namespaceSelector"),
        match_label_keys=_str_tuple(match_keys, "matchLabelKeys") if match_keys else (),
        mismatch_label_keys=_str_tuple(mismatch_keys, "mismatchLabelKeys") if mismatch_keys else (),
    )


def _pod_affinity(value: object) -> models.PodAffinity | None:
    if value is None:
        return None
    pa = _obj(value, "")
    rpath = "requiredDuringSchedulingIgnoredDuringExecution"
    required = []
    for i, t in enumerate(_list(pa.get(rpath), rpath)):
        try:
            required.append(_pod_affinity_term(t))
        except _Bad as e:
            raise _within(e, f"{rpath}[{i}]") from None
    ppath = "preferredDuringSchedulingIgnoredDuringExecution"
    preferred = []
    for i, raw in enumerate(_list(pa.get(ppath), ppath)):
        try:
            item = _obj(raw, "")
            weight = _int(item.get("weight"), "weight", low=0, high=100)
            try:
                term = _pod_affinity_term(item.get("podAffinityTerm"))
            except _Bad as e:
                raise _within(e, "podAffinityTerm") from None
            preferred.append(_WeightedTerm(weight=weight, term=term))
        except _Bad as e:
            raise _within(e, f"{ppath}[{i}]") from None
    return _PodAffinity(required=tuple(required), preferred=tuple(preferred))


# ---- pod parts --------------------------------------------------------------------------


def _host_ports(value: object, *, host_network: bool) -> tuple[models.HostPort, ...]:
    ports = []
    for i, raw in enumerate(_list(value, "ports")):
        try:
            p = _obj(raw, "")
            host_port = p.get("hostPort")
            if host_port is None or host_port == 0:
                if not host_network:
                    continue
                # SetDefaults_Pod: with hostNetwork, hostPort defaults to containerPort.
                port = _int(p.get("containerPort"), "containerPort", low=1, high=65535)
            else:
                port = _int(host_port, "hostPort", low=1, high=65535)
            ports.append(
                _HostPort(
                    port=port,
                    protocol=_enum(p.get("protocol"), "protocol", _PROTOCOLS, "TCP"),
                    host_ip=_str(p.get("hostIP"), "hostIP"),
                )
            )
        except _Bad as e:
            raise _within(e, f"ports[{i}]") from None
    return tuple(ports)


def _container(value: object, *, host_network: bool) -> models.Container:
    c = _obj(value, "")
    resources = c.get("resources")
    raw_ports = c.get("ports")
    restart_policy = c.get("restartPolicy")
    return _Container(
        name=_str(c.get("name"), "name"),
        requests=_requests_with_limits(resources, "resources") if resources else {},
        host_ports=_host_ports(raw_ports, host_network=host_network) if raw_ports else (),
        restart_policy=_str(restart_policy, "restartPolicy") if restart_policy else "",
    )


def _containers(value: object, path: str, *, host_network: bool) -> tuple[models.Container, ...]:
    out = []
    for i, c in enumerate(_list(value, path)):
        try:
            out.append(_container(c, host_network=host_network))
        except _Bad as e:
            raise _within(e, f"{path}[{i}]") from None
    return tuple(out)


def _toleration(value: object) -> models.Toleration:
    t = _obj(value, "")
    seconds = t.get("tolerationSeconds")
    return _Toleration(
        key=_str(t.get("key"), "key"),
        operator=_enum(t.get("operator"), "operator", _TOLERATION_OPS, "Equal"),
        value=_str(t.get("value"), "value"),
        effect=_enum(t.get("effect"), "effect", _TOLERATION_EFFECTS, ""),
        toleration_seconds=None
        if seconds is None
        else _int(seconds, "tolerationSeconds", low=-_INT64_MAX - 1, high=_INT64_MAX),
    )


def _spread_constraint(value: object) -> models.TopologySpreadConstraint:
    c = _obj(value, "")
    topology_key = _str(c.get("topologyKey"), "topologyKey")
    if not topology_key:
        raise _Bad("topologyKey", "required")
    when = c.get("whenUnsatisfiable")
    if when is None:
        raise _Bad("whenUnsatisfiable", "required")
    min_domains = c.get("minDomains")
    match_keys = c.get("matchLabelKeys")
    return _Spread(
        max_skew=_int(c.get("maxSkew"), "maxSkew", low=1, high=_INT32_MAX),
        topology_key=topology_key,
        when_unsatisfiable=_enum(when, "whenUnsatisfiable", _WHEN_UNSATISFIABLE, ""),
        label_selector=_selector_at(c.get("labelSelector"), "labelSelector"),
        min_domains=None
        if min_domains is None
        else _int(min_domains, "minDomains", low=1, high=_INT32_MAX),
        node_affinity_policy=_enum(
            c.get("nodeAffinityPolicy"), "nodeAffinityPolicy", _POLICIES, "Honor"
        ),
        node_taints_policy=_enum(
            c.get("nodeTaintsPolicy"), "nodeTaintsPolicy", _POLICIES, "Ignore"
        ),
        match_label_keys=_str_tuple(match_keys, "matchLabelKeys") if match_keys else (),
    )


def _each(value: object, path: str, convert: Callable[[object], Any]) -> tuple[Any, ...]:
    out = []
    for i, item in enumerate(_list(value, path)):
        try:
            out.append(convert(item))
        except _Bad as e:
            raise _within(e, f"{path}[{i}]") from None
    return tuple(out)


def _owner(value: object) -> models.OwnerRef | None:
    for i, raw in enumerate(_list(value, "metadata.ownerReferences")):
        path = f"metadata.ownerReferences[{i}]"
        ref = _obj(raw, path)
        if _bool(ref.get("controller"), f"{path}.controller"):
            return _OwnerRef(
                kind=_str(ref.get("kind"), f"{path}.kind"),
                name=_str(ref.get("name"), f"{path}.name"),
                uid=_str(ref.get("uid"), f"{path}.uid"),
                controller=True,
            )
    return None


def _min_member(annotations: Mapping[str, str], keys: tuple[str, ...]) -> int:
    for key in keys:
        raw = annotations.get(key)
        if raw is not None:
            text = raw.strip()
            if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= _INT32_MAX:
                raise _Bad(
                    f"metadata.annotations[{key}]", f"expected a positive integer, got {_show(raw)}"
                )
            return int(text)
    return 1


def _group(labels: Mapping[str, str], annotations: Mapping[str, str]) -> models.PodGroupRef | None:
    name = labels.get(POD_GROUP_LABEL)
    if name:
        keys = (POD_GROUP_MIN_MEMBER, MIN_MEMBER_ANNOTATION)
        return _PodGroupRef(name=name, min_member=_min_member(annotations, keys))
    name = annotations.get(GROUP_ANNOTATION)
    if name:
        return _PodGroupRef(
            name=name, min_member=_min_member(annotations, (MIN_MEMBER_ANNOTATION,))
        )
    return None


# ---- pods -------------------------------------------------------------------------------


def _identity(obj: object) -> tuple[str, str, str]:
    """(uid, namespace, name), tolerating any garbage, for messages and best-effort pods."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return "", "", ""
    uid, ns, name = meta.get("uid"), meta.get("namespace"), meta.get("name")
    return (
        uid if isinstance(uid, str) else "",
        ns if isinstance(ns, str) and ns else "default",
        name if isinstance(name, str) else "",
    )


def _named(obj: object) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The object, its metadata and its name, which pods and nodes must have."""
    if not isinstance(obj, dict):
        raise _Bad("", f"expected an object, got {_type_name(obj)}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise _Bad("metadata", f"expected an object, got {_type_name(meta)}")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _Bad("metadata.name", "required" if name is None else "expected a non-empty string")
    return obj, meta, name


def _pod(obj: object) -> models.Pod:
    obj, meta, name = _named(obj)
    namespace = _str(meta.get("namespace"), "metadata.namespace") or "default"
    labels = _str_map(meta.get("labels"), "metadata.labels")
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    spec = _obj(obj.get("spec"), "spec")
    status = _obj(obj.get("status"), "status")
    host_network = _bool(spec.get("hostNetwork"), "spec.hostNetwork")
    raw_init = spec.get("initContainers")
    raw_overhead = spec.get("overhead")
    raw_pod_resources = spec.get("resources")
    raw_tolerations = spec.get("tolerations")
    raw_spread = spec.get("topologySpreadConstraints")
    priority = spec.get("priority")
    node_affinity = pod_affinity = pod_anti_affinity = None
    raw_affinity = spec.get("affinity")
    if raw_affinity:
        affinity = _obj(raw_affinity, "spec.affinity")
        try:
            node_affinity = _node_affinity(affinity.get("nodeAffinity"))
        except _Bad as e:
            raise _within(e, "spec.affinity.nodeAffinity") from None
        try:
            pod_affinity = _pod_affinity(affinity.get("podAffinity"))
        except _Bad as e:
            raise _within(e, "spec.affinity.podAffinity") from None
        try:
            pod_anti_affinity = _pod_affinity(affinity.get("podAntiAffinity"))
        except _Bad as e:
            raise _within(e, "spec.affinity.podAntiAffinity") from None
    raw_owners = meta.get("ownerReferences")

    return _Pod(
        uid=_str(meta.get("uid"), "metadata.uid"),
        namespace=namespace,
        name=name,
        labels=labels,
        annotations=annotations,
        scheduler_name=_str(spec.get("schedulerName"), "spec.schedulerName") or "default-scheduler",
        node_name=_str(spec.get("nodeName"), "spec.nodeName"),
        nominated_node_name=_str(status.get("nominatedNodeName"), "status.nominatedNodeName"),
        priority=0
        if priority is None
        else _int(priority, "spec.priority", low=-_INT32_MAX - 1, high=_INT32_MAX),
        preemption_policy=_enum(
            spec.get("preemptionPolicy"),
            "spec.preemptionPolicy",
            _PREEMPTION_POLICIES,
            "PreemptLowerPriority",
        ),
        containers=_containers(
            spec.get("containers"), "spec.containers", host_network=host_network
        ),
        init_containers=_containers(raw_init, "spec.initContainers", host_network=host_network)
        if raw_init
        else (),
        overhead=_resources(raw_overhead, "spec.overhead") if raw_overhead else {},
        pod_requests=_requests_with_limits(raw_pod_resources, "spec.resources")
        if raw_pod_resources
        else {},
        node_selector=_str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        node_affinity=node_affinity,
        pod_affinity=pod_affinity,
        pod_anti_affinity=pod_anti_affinity,
        tolerations=_each(raw_tolerations, "spec.tolerations", _toleration)
        if raw_tolerations
        else (),
        topology_spread_constraints=_each(
            raw_spread, "spec.topologySpreadConstraints", _spread_constraint
        )
        if raw_spread
        else (),
        phase=_str(status.get("phase"), "status.phase") or "Pending",
        deleting=meta.get("deletionTimestamp") is not None,
        owner=_owner(raw_owners) if raw_owners else None,
        group=_group(labels, annotations) if labels or annotations else None,
        resource_version=_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        creation_timestamp=_timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _best_effort_pod(obj: object, reason: str) -> models.Pod:
    """Identity and the few scalars the scheduler needs to report the pod, each taken only
    if well-typed."""
    uid, namespace, name = _identity(obj)
    d: dict[str, Any] = obj if isinstance(obj, dict) else {}
    meta = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
    spec = d.get("spec") if isinstance(d.get("spec"), dict) else {}
    status = d.get("status") if isinstance(d.get("status"), dict) else {}
    assert isinstance(meta, dict) and isinstance(spec, dict) and isinstance(status, dict)

    def str_map(value: object) -> dict[str, str]:
        if isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            return value
        return {}

    priority = spec.get("priority")
    return _Pod(
        uid=uid,
        namespace=namespace,
        name=name,
        labels=str_map(meta.get("labels")),
        annotations=str_map(meta.get("annotations")),
        scheduler_name=_text(spec.get("schedulerName")) or "default-scheduler",
        node_name=_text(spec.get("nodeName")),
        priority=priority
        if type(priority) is int and -_INT32_MAX - 1 <= priority <= _INT32_MAX
        else 0,
        phase=_text(status.get("phase")) or "Pending",
        deleting=meta.get("deletionTimestamp") is not None,
        resource_version=_text(meta.get("resourceVersion")),
        invalid_reason=reason,
    )


def _pod_ref(obj: object) -> str:
    _, namespace, name = _identity(obj)
    return f"pod {namespace}/{name or '<unnamed>'}"


def pod_from_k8s(obj: Mapping[str, Any], *, strict: bool = True) -> models.Pod:
    """A Pod from its API JSON. Malformed input raises ConversionError, or with
    strict=False gives a best-effort Pod whose `invalid_reason` says what is wrong, so the
    scheduler reports it unschedulable instead of silently dropping it."""
    try:
        return _pod(obj)
    except _Bad as e:
        error = ConversionError(_pod_ref(obj), e.detail)
        if strict:
            raise error from None
        return _best_effort_pod(obj, str(error))


# ---- nodes ------------------------------------------------------------------------------


def _taint(value: object) -> models.Taint:
    t = _obj(value, "")
    key = _str(t.get("key"), "key")
    if not key:
        raise _Bad("key", "required")
    effect = t.get("effect")
    if effect is None:
        raise _Bad("effect", "required")
    return _Taint(
        key=key,
        value=_str(t.get("value"), "value"),
        effect=_enum(effect, "effect", _TAINT_EFFECTS, ""),
    )


def _node(obj: object) -> models.Node:
    obj, meta, name = _named(obj)
    spec = _obj(obj.get("spec"), "spec")
    status = _obj(obj.get("status"), "status")
    raw_allocatable = status.get("allocatable")
    if raw_allocatable is None:
        allocatable = _resources(status.get("capacity"), "status.capacity")
    else:
        allocatable = _resources(raw_allocatable, "status.allocatable")
    # A node that reports no Ready condition (hand-written clusters) counts as ready;
    # kube-scheduler itself only sees readiness through the not-ready taints.
    ready = True
    for i, raw in enumerate(_list(status.get("conditions"), "status.conditions")):
        cond = _obj(raw, f"status.conditions[{i}]")
        if cond.get("type") == "Ready":
            ready = _str(cond.get("status"), f"status.conditions[{i}].status") == "True"
    return _Node(
        name=name,
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        taints=_each(spec.get("taints"), "spec.taints", _taint),
        allocatable=allocatable,
        unschedulable=_bool(spec.get("unschedulable"), "spec.unschedulable"),
        ready=ready,
        resource_version=_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        uid=_str(meta.get("uid"), "metadata.uid"),
    )


def _node_ref(obj: object) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"node {name if isinstance(name, str) and name else '<unnamed>'}"


def node_from_k8s(obj: Mapping[str, Any]) -> models.Node:
    """A Node from its API JSON. Always strict: a node the scheduler cannot read raises
    ConversionError (placing pods on a misread node would be worse than not seeing it)."""
    try:
        return _node(obj)
    except _Bad as e:
        raise ConversionError(_node_ref(obj), e.detail) from None


# ---- cluster files ----------------------------------------------------------------------


def _documents(text: str) -> list[object]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except ValueError:
            pass  # YAML flow style is a superset of JSON; let the YAML parser explain
    try:
        return [d for d in yaml.load_all(text, Loader=_YamlLoader) if d is not None]
    except yaml.YAMLError as e:
        raise ConversionError("", f"invalid YAML: {e}") from None


def _items(documents: list[object]) -> Iterator[tuple[str, str, object]]:
    """(where, kind, object) for every object, unwrapping List/NodeList/PodList."""
    many = len(documents) > 1
    for d, doc in enumerate(documents):
        prefix = f"documents[{d}]." if many else ""
        if isinstance(doc, list):  # a bare JSON array of objects
            for i, item in enumerate(doc):
                kind = item.get("kind") if isinstance(item, dict) else None
                yield f"{prefix}[{i}]", kind if isinstance(kind, str) else "", item
            continue
        if not isinstance(doc, dict):
            raise ConversionError(prefix.rstrip(".") or "document", "expected an object")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            implied = kind[: -len("List")] if kind != "List" else ""
            items = doc.get("items")
            if items is None:
                continue
            if not isinstance(items, list):
                raise ConversionError(f"{prefix}items", f"expected a list, got {_type_name(items)}")
            for i, item in enumerate(items):
                item_kind = item.get("kind") if isinstance(item, dict) else None
                yield (
                    f"{prefix}items[{i}]",
                    item_kind if isinstance(item_kind, str) and item_kind else implied,
                    item,
                )
        else:
            yield prefix.rstrip(".") or "document", kind if isinstance(kind, str) else "", doc


def load_cluster(text: str) -> tuple[list[models.Node], list[models.Pod]]:
    """Every Node and Pod in `kubectl get nodes,pods -A -o yaml|json` output (a List, a
    NodeList/PodList, one object, or several YAML documents), converted strictly. Other
    kinds are skipped. Errors name the item: `items[3] (Pod default/web): spec...`."""
    nodes: list[models.Node] = []
    pods: list[models.Pod] = []
    for where, kind, item in _items(_documents(text)):
        if kind == "Node":
            try:
                nodes.append(_node(item))
            except _Bad as e:
                name = _node_ref(item).removeprefix("node ")
                raise ConversionError(f"{where} (Node {name})", e.detail) from None
        elif kind == "Pod":
            try:
                pods.append(_pod(item))
            except _Bad as e:
                ref = _pod_ref(item).removeprefix("pod ")
                raise ConversionError(f"{where} (Pod {ref})", e.detail) from None
        elif not kind:
            raise ConversionError(where, "missing kind")
    return nodes, pods
