"""Domain objects of the scheduling core: Nodes, Pods and what scheduling reads of them.

Frozen dataclasses built once per watch event (by `splitsched.core.convert` from the API's
JSON, or by the services from the gRPC contract) and never mutated afterwards. Quantities
are already canonical integers here: cpu in millicores, everything else in base units
(bytes, counts), so the hot path never parses a string.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from splitsched.core.quantity import INT64_MAX

# Canonical resource names. Everything else a pod or node names is an extended resource.
CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# kube-scheduler scores a container that requests nothing as if it asked for this much
# (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_NONZERO_MILLI_CPU = 100
DEFAULT_NONZERO_MEMORY = 200 * 1024 * 1024

ResourceList = Mapping[str, int]
"""Resource name -> canonical integer amount (cpu in millicores)."""


class TaintEffect(enum.StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod's toleration. An empty key with operator Exists tolerates every taint;
    an empty effect matches every effect."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False  # an operator Kubernetes doesn't know tolerates nothing


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One `matchExpressions`/`matchFields` entry: In, NotIn, Exists, DoesNotExist, Gt, Lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed together. A term with no requirements matches no node."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """`required` is None when the pod has no requiredDuringScheduling... terms; the terms
    inside are ORed."""

    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[PreferredSchedulingTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    """In, NotIn, Exists, DoesNotExist."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector. An empty selector matches everything; a None selector (where
    the API allows one) matches nothing."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In":
                if not present or labels[req.key] not in req.values:
                    return False
            elif req.operator == "NotIn":
                if present and labels[req.key] in req.values:
                    return False
            elif req.operator == "Exists":
                if not present:
                    return False
            elif req.operator == "DoesNotExist":
                if present:
                    return False
            else:
                return False
        return True


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    label_selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """Used for both podAffinity and podAntiAffinity."""

    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"  # Honor | Ignore
    node_taints_policy: str = "Ignore"  # Honor | Ignore
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port with hostPort set. An empty or 0.0.0.0 host_ip means every address."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    requests: ResourceList = field(default_factory=dict)
    host_ports: tuple[HostPort, ...] = ()
    restart_policy: str = ""  # "Always" marks a restartable init container (a sidecar)
    image: str = ""  # as the pod names it; the watcher streams it for pending pods only

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == "Always"


@dataclass(frozen=True, slots=True)
class PodVolume:
    """A pod volume that reaches a PersistentVolumeClaim in the pod's namespace: a
    `persistentVolumeClaim` volume, or an `ephemeral` one, whose claim Kubernetes creates
    as "<pod name>-<volume name>". The only volumes scheduling reads."""

    name: str
    claim_name: str
    ephemeral: bool = False
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One of spec.resourceClaims, resolved to the ResourceClaim it names: directly
    (resourceClaimName), or for a template through status.resourceClaimStatuses, where
    kube-controller-manager records the claim it made. `waiting` is kube's reason when it
    cannot be resolved yet; a template claim the controller chose not to make is left out.
    `from_template`: the claim must be controlled by the pod (kube's IsForPod), or a stale
    status could lead the pod to another pod's claim."""

    name: str
    claim_name: str = ""
    waiting: str = ""
    from_template: bool = False


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


@dataclass(frozen=True, slots=True)
class PodGroupRef:
    """All-or-nothing group a pod belongs to (gang scheduling)."""

    name: str
    min_member: int


@dataclass(frozen=True, slots=True)
class Pod:
    """What scheduling reads of a Pod. `invalid_reason` is set (and the pod is otherwise
    best-effort filled in) when the object could not be converted, so the pod is reported
    unschedulable with that reason instead of being dropped."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    nominated_node_name: str = ""
    priority: int = 0
    preemption_policy: str = "PreemptLowerPriority"
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: ResourceList = field(default_factory=dict)
    pod_requests: ResourceList = field(default_factory=dict)  # spec.resources (pod level)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    # spec.schedulingGates names: while any remain the pod is never tried (the API server
    # refuses its Binding); they can only be removed, never added after creation.
    scheduling_gates: tuple[str, ...] = ()
    phase: str = "Pending"
    deleting: bool = False
    owner: OwnerRef | None = None
    group: PodGroupRef | None = None
    resource_version: str = ""
    creation_timestamp: float = 0.0
    invalid_reason: str = ""
    image_volumes: tuple[str, ...] = ()  # spec.volumes[].image.reference (ImageLocality)
    volumes: tuple[PodVolume, ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    _requests_cache: dict[str, int] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def requests(self) -> ResourceList:
        """The pod's effective request, as Kubernetes counts it (resource.PodRequests):
        app containers and sidecars summed, init containers as a running maximum with the
        sidecars started before them, pod-level requests taking precedence, plus overhead.
        Does not include the implicit `pods: 1`."""
        cached = self._requests_cache
        if cached is None:
            cached = effective_requests(self)
            object.__setattr__(self, "_requests_cache", cached)
        return cached

    @property
    def host_ports(self) -> tuple[HostPort, ...]:
        ports: list[HostPort] = []
        for c in self.init_containers:
            if c.is_sidecar:
                ports.extend(c.host_ports)
        for c in self.containers:
            ports.extend(c.host_ports)
        return tuple(ports)

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def is_assigned(self) -> bool:
        return bool(self.node_name)


def _add_into(total: dict[str, int], more: Mapping[str, int]) -> None:
    """Sums that saturate at int64's maximum: each amount fits in int64, but containers
    that each ask for nearly 8 EiB would overflow the node table's int64 columns. A
    saturated request fits no node, as the exact sum would not."""
    for name, amount in more.items():
        total[name] = min(total.get(name, 0) + amount, INT64_MAX)


def _max_into(total: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount


def effective_requests(pod: Pod, *, nonzero_defaults: bool = False) -> dict[str, int]:
    """resource.PodRequests semantics. With `nonzero_defaults`, a container that requests no
    cpu (memory) counts as DEFAULT_NONZERO_MILLI_CPU (DEFAULT_NONZERO_MEMORY): the figures
    kube-scheduler's scoring plugins use."""

    def container_requests(c: Container) -> Mapping[str, int]:
        if not nonzero_defaults:
            return c.requests
        req = dict(c.requests)
        # Defaults fill a missing key only: an explicit 0 stays 0, as in Kubernetes.
        if CPU not in req:
            req[CPU] = DEFAULT_NONZERO_MILLI_CPU
        if MEMORY not in req:
            req[MEMORY] = DEFAULT_NONZERO_MEMORY
        return req

    total: dict[str, int] = {}
    for c in pod.containers:
        _add_into(total, container_requests(c))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in pod.init_containers:
        req = container_requests(c)
        if c.is_sidecar:
            _add_into(total, req)
            _add_into(sidecars, req)
            current = dict(sidecars)
        else:
            current = dict(req)
            _add_into(current, sidecars)
        _max_into(init_peak, current)
    _max_into(total, init_peak)
    for name, amount in pod.pod_requests.items():
        total[name] = amount
    _add_into(total, pod.overhead)
    return total


@dataclass(frozen=True, slots=True)
class ContainerImage:
    """One entry of a node's status.images: every name the image goes by, and its size."""

    names: tuple[str, ...]
    size_bytes: int


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: ResourceList = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True
    resource_version: str = ""
    uid: str = ""
    images: tuple[ContainerImage, ...] = ()  # status.images (ImageLocality)


@dataclass(frozen=True, slots=True)
class Namespace:
    """What scheduling reads of a Namespace: its labels, which pod affinity terms'
    namespaceSelectors match."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """What preemption reads of a PDB: which pods it protects and how many of them may
    still be disrupted (status.disruptionsAllowed)."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int

    def protects(self, pod: Pod) -> bool:
        return (
            pod.namespace == self.namespace
            and self.selector is not None
            and self.selector.matches(pod.labels)
        )
