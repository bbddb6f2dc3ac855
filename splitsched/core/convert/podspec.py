"""The parts of a pod spec scheduling reads: containers (their requests, host ports and
image), image volumes and the volumes that use claims, tolerations, topology spread
constraints, scheduling gates and the three affinities.

Called by `pods` once per pod. Kubernetes' defaulting that scheduling depends on is
mirrored here (SetDefaults_Pod): requests default to limits per resource, with hostNetwork
hostPort defaults to containerPort, toleration operator Equal, spread policies
Honor/Ignore. Paths are relative to the part being read; the caller re-roots errors.
"""

from __future__ import annotations

from splitsched.core import models
from splitsched.core.convert import fast
from splitsched.core.convert.fields import (
    INT32_MAX,
    INT64_MAX,
    BadField,
    as_bool,
    as_enum,
    as_int,
    as_list,
    as_object,
    as_resources,
    as_str,
    as_str_tuple,
    at,
    each,
    requests_with_limits,
    required,
    required_str,
    within,
)
from splitsched.core.convert.selectors import label_selector, node_affinity, pod_affinity

_TOLERATION_OPS = frozenset({"Equal", "Exists"})
_TOLERATION_EFFECTS = frozenset({effect.value for effect in models.TaintEffect} | {""})
_WHEN_UNSATISFIABLE = frozenset({"DoNotSchedule", "ScheduleAnyway"})
_POLICIES = frozenset({"Honor", "Ignore"})
_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})

Affinities = tuple[models.NodeAffinity | None, models.PodAffinity | None, models.PodAffinity | None]
NO_AFFINITIES: Affinities = (None, None, None)


def _host_ports(value: object, *, host_network: bool) -> tuple[models.HostPort, ...]:
    ports = []
    for i, raw in enumerate(as_list(value, "ports")):
        try:
            p = as_object(raw, "")
            host_port = p.get("hostPort")
            if host_port is None or host_port == 0:
                if not host_network:
                    continue
                # SetDefaults_Pod: with hostNetwork, hostPort defaults to containerPort.
                port = as_int(p.get("containerPort"), "containerPort", low=1, high=65535)
            else:
                port = as_int(host_port, "hostPort", low=1, high=65535)
            ports.append(
                fast.HostPort(
                    port=port,
                    protocol=as_enum(p.get("protocol"), "protocol", _PROTOCOLS, "TCP"),
                    host_ip=as_str(p.get("hostIP"), "hostIP"),
                )
            )
        except BadField as e:
            raise within(e, f"ports[{i}]") from None
    return tuple(ports)


def _container(value: object, *, host_network: bool) -> models.Container:
    c = as_object(value, "")
    resources = c.get("resources")
    raw_ports = c.get("ports")
    restart_policy = c.get("restartPolicy")
    return fast.Container(
        name=as_str(c.get("name"), "name"),
        requests=requests_with_limits(resources, "resources") if resources else {},
        host_ports=_host_ports(raw_ports, host_network=host_network) if raw_ports else (),
        restart_policy=as_str(restart_policy, "restartPolicy") if restart_policy else "",
        image=as_str(c.get("image"), "image"),
    )


def containers(value: object, path: str, *, host_network: bool) -> tuple[models.Container, ...]:
    """spec.containers or spec.initContainers at `path`: a list, which may be empty."""
    out = []
    for i, c in enumerate(as_list(value, path)):
        try:
            out.append(_container(c, host_network=host_network))
        except BadField as e:
            raise within(e, f"{path}[{i}]") from None
    return tuple(out)


def _toleration(value: object) -> models.Toleration:
    t = as_object(value, "")
    seconds = t.get("tolerationSeconds")
    return fast.Toleration(
        key=as_str(t.get("key"), "key"),
        operator=as_enum(t.get("operator"), "operator", _TOLERATION_OPS, "Equal"),
        value=as_str(t.get("value"), "value"),
        effect=as_enum(t.get("effect"), "effect", _TOLERATION_EFFECTS, ""),
        toleration_seconds=None
        if seconds is None
        else as_int(seconds, "tolerationSeconds", low=-INT64_MAX - 1, high=INT64_MAX),
    )


def _spread_constraint(value: object) -> models.TopologySpreadConstraint:
    c = as_object(value, "")
    topology_key = required_str(c, "topologyKey")
    when = required(c, "whenUnsatisfiable")
    min_domains = c.get("minDomains")
    match_keys = c.get("matchLabelKeys")
    return fast.TopologySpreadConstraint(
        max_skew=as_int(c.get("maxSkew"), "maxSkew", low=1, high=INT32_MAX),
        topology_key=topology_key,
        when_unsatisfiable=as_enum(when, "whenUnsatisfiable", _WHEN_UNSATISFIABLE, ""),
        label_selector=at(c.get("labelSelector"), "labelSelector", label_selector),
        min_domains=None
        if min_domains is None
        else as_int(min_domains, "minDomains", low=1, high=INT32_MAX),
        node_affinity_policy=as_enum(
            c.get("nodeAffinityPolicy"), "nodeAffinityPolicy", _POLICIES, "Honor"
        ),
        node_taints_policy=as_enum(
            c.get("nodeTaintsPolicy"), "nodeTaintsPolicy", _POLICIES, "Ignore"
        ),
        match_label_keys=as_str_tuple(match_keys, "matchLabelKeys") if match_keys else (),
    )


# Optional parts: each absent, null or empty one reads as nothing without a further look.


def init_containers(value: object, *, host_network: bool) -> tuple[models.Container, ...]:
    return containers(value, "spec.initContainers", host_network=host_network) if value else ()


def overhead(value: object) -> dict[str, int]:
    return as_resources(value, "spec.overhead") if value else {}


def pod_requests(value: object) -> dict[str, int]:
    """spec.resources: pod-level requests, which take precedence over the containers' sum."""
    return requests_with_limits(value, "spec.resources") if value else {}


def tolerations(value: object) -> tuple[models.Toleration, ...]:
    return each(value, "spec.tolerations", _toleration) if value else ()


def spread_constraints(value: object) -> tuple[models.TopologySpreadConstraint, ...]:
    return each(value, "spec.topologySpreadConstraints", _spread_constraint) if value else ()


def _volume(value: object, pod_name: str) -> models.PodVolume | None:
    v = as_object(value, "")
    claim = v.get("persistentVolumeClaim")
    if claim is None and v.get("ephemeral") is None:
        return None  # no claim behind it: nothing for scheduling
    name = as_str(v.get("name"), "name")
    if claim is None:
        # ephemeral.VolumeClaimName: the claim Kubernetes creates for the pod.
        return models.PodVolume(name=name, claim_name=f"{pod_name}-{name}", ephemeral=True)
    source = as_object(claim, "persistentVolumeClaim")
    return models.PodVolume(
        name=name,
        claim_name=as_str(source.get("claimName"), "persistentVolumeClaim.claimName"),
        read_only=as_bool(source.get("readOnly"), "persistentVolumeClaim.readOnly"),
    )


def volumes(value: object, pod_name: str) -> tuple[models.PodVolume, ...]:
    """spec.volumes that reach a PersistentVolumeClaim (persistentVolumeClaim, ephemeral);
    the others (secrets, config maps, projected tokens, ...) the volume plugins never read."""
    if not value:
        return ()
    out = []
    for i, raw in enumerate(as_list(value, "spec.volumes")):
        try:
            volume = _volume(raw, pod_name)
        except BadField as e:
            raise within(e, f"spec.volumes[{i}]") from None
        if volume is not None:
            out.append(volume)
    return tuple(out)


def image_volumes(value: object) -> tuple[str, ...]:
    """spec.volumes[].image.reference: the images mounted as volumes (ImageLocality scores
    them as it scores the containers' images)."""
    if not value:
        return ()
    out = []
    for i, raw in enumerate(as_list(value, "spec.volumes")):
        image = as_object(raw, f"spec.volumes[{i}]").get("image")
        if image is not None:
            ref = as_object(image, f"spec.volumes[{i}].image").get("reference")
            out.append(as_str(ref, f"spec.volumes[{i}].image.reference"))
    return tuple(out)


def _gate_name(value: object) -> str:
    return required_str(as_object(value, ""), "name")


def scheduling_gates(value: object) -> tuple[str, ...]:
    """spec.schedulingGates as their names (the API server requires a name on each)."""
    return each(value, "spec.schedulingGates", _gate_name) if value else ()


def affinities(value: object) -> Affinities:
    """spec.affinity as (nodeAffinity, podAffinity, podAntiAffinity); paths are absolute."""
    affinity = as_object(value, "spec.affinity")
    part = "nodeAffinity"  # the part being read, for the error's path
    try:
        node = node_affinity(affinity.get(part))
        part = "podAffinity"
        pod = pod_affinity(affinity.get(part))
        part = "podAntiAffinity"
        anti = pod_affinity(affinity.get(part))
    except BadField as e:
        raise within(e, f"spec.affinity.{part}") from None
    return node, pod, anti
