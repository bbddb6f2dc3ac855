"""API JSON -> models: every field mapping, Kubernetes' defaulting, error paths, cluster files."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core import models
from splitsched.core.convert import ConversionError, fast, load_cluster, node_from_k8s, pod_from_k8s

DATA = Path(__file__).parent / "data"
MI = 1024**2
GI = 1024**3


def typical_pod() -> dict[str, Any]:
    """What a watch event carries for a Deployment's pod (trimmed managedFields)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-5f7c9d-abcde",
            "generateName": "web-5f7c9d-",
            "namespace": "default",
            "uid": "1d2c3b4a-0000-4000-8000-000000000001",
            "resourceVersion": "48213",
            "creationTimestamp": "2025-06-01T12:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "5f7c9d", "tier": "frontend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2025-06-01T11:59:00Z"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-5f7c9d",
                    "uid": "9a8b7c6d-0000-4000-8000-000000000002",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2025-06-01T12:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
                }
            ],
        },
        "spec": {
            "volumes": [{"name": "kube-api-access", "projected": {"sources": []}}],
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/web:1.4.2",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "env": [{"name": "MODE", "value": "prod"}],
                    "resources": {
                        "limits": {"cpu": "1", "memory": "512Mi"},
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                    },
                    "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run"}],
                    "terminationMessagePath": "/dev/termination-log",
                    "imagePullPolicy": "IfNotPresent",
                },
                {
                    "name": "proxy",
                    "image": "registry.example/envoy:1.30",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                },
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app": "web"}},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }
                    ]
                }
            },
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


# ---- pods: field mappings ----------------------------------------------------------------


def test_typical_pod_maps_every_field() -> None:
    pod = pod_from_k8s(typical_pod())
    assert pod.uid == "1d2c3b4a-0000-4000-8000-000000000001"
    assert (pod.namespace, pod.name, pod.key) == (
        "default",
        "web-5f7c9d-abcde",
        "default/web-5f7c9d-abcde",
    )
    assert pod.labels == {"app": "web", "pod-template-hash": "5f7c9d", "tier": "frontend"}
    assert pod.annotations == {"kubectl.kubernetes.io/restartedAt": "2025-06-01T11:59:00Z"}
    assert pod.scheduler_name == "default-scheduler"
    assert pod.node_name == "" and pod.nominated_node_name == ""
    assert pod.priority == 0 and pod.preemption_policy == "PreemptLowerPriority"
    assert [c.name for c in pod.containers] == ["app", "proxy"]
    assert pod.containers[0].requests == {"cpu": 250, "memory": 256 * MI}
    assert pod.containers[1].requests == {"cpu": 100, "memory": 64 * MI}
    assert pod.containers[0].host_ports == ()  # containerPort without hostPort: no host port
    assert pod.requests == {"cpu": 350, "memory": 320 * MI}
    assert pod.owner == models.OwnerRef(
        kind="ReplicaSet",
        name="web-5f7c9d",
        uid="9a8b7c6d-0000-4000-8000-000000000002",
        controller=True,
    )
    assert pod.tolerations == (
        models.Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute", 300),
        models.Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 300),
    )
    assert pod.topology_spread_constraints == (
        models.TopologySpreadConstraint(
            max_skew=1,
            topology_key="topology.kubernetes.io/zone",
            when_unsatisfiable="DoNotSchedule",
            label_selector=models.LabelSelector(match_labels=(("app", "web"),)),
            min_domains=None,
            node_affinity_policy="Honor",
            node_taints_policy="Ignore",
        ),
    )
    assert pod.pod_anti_affinity == models.PodAffinity(
        preferred=(
            models.WeightedPodAffinityTerm(
                100,
                models.PodAffinityTerm(
                    label_selector=models.LabelSelector(match_labels=(("app", "web"),)),
                    topology_key="kubernetes.io/hostname",
                ),
            ),
        )
    )
    assert pod.pod_affinity is None and pod.node_affinity is None
    assert pod.phase == "Pending" and not pod.deleting
    assert pod.group is None
    assert pod.resource_version == "48213"
    assert pod.creation_timestamp == 1748779200.0  # 2025-06-01T12:00:00Z
    assert pod.invalid_reason == ""


def minimal_pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [], **spec}}


def test_defaults_for_absent_fields() -> None:
    pod = pod_from_k8s({"metadata": {"name": "p"}})
    assert pod.namespace == "default"
    assert pod.scheduler_name == "default-scheduler"
    assert pod.priority == 0 and pod.preemption_policy == "PreemptLowerPriority"
    assert pod.phase == "Pending"
    assert pod.containers == () and pod.tolerations == ()
    assert pod.node_affinity is None and pod.owner is None and pod.group is None
    assert pod.creation_timestamp == 0.0


def test_scalar_fields() -> None:
    obj = minimal_pod(
        schedulerName="splitsched",
        nodeName="n1",
        priority=-5,
        preemptionPolicy="Never",
    )
    obj["status"] = {"nominatedNodeName": "n2", "phase": "Running"}
    obj["metadata"]["deletionTimestamp"] = "2025-06-01T12:00:00Z"
    obj["metadata"]["creationTimestamp"] = "2025-06-01T12:00:01.5+02:00"
    pod = pod_from_k8s(obj)
    assert pod.scheduler_name == "splitsched"
    assert pod.node_name == "n1" and pod.is_assigned
    assert pod.nominated_node_name == "n2"
    assert pod.priority == -5  # negative priorities are legal
    assert pod.preemption_policy == "Never"
    assert pod.phase == "Running"
    assert pod.deleting
    assert pod.creation_timestamp == 1748779200.0 - 2 * 3600 + 1.5


def test_requests_default_to_limits_per_resource() -> None:
    pod = pod_from_k8s(
        minimal_pod(
            containers=[
                {"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},
                {
                    "name": "b",
                    "resources": {
                        "requests": {"cpu": "100m"},
                        "limits": {"cpu": "500m", "memory": "128Mi", "example.com/dev": "3"},
                    },
                },
                {"name": "c"},
            ],
            initContainers=[{"name": "i", "resources": {"limits": {"memory": "2Gi"}}}],
            resources={"limits": {"cpu": "4"}, "requests": {"memory": "3Gi"}},
        )
    )
    assert pod.containers[0].requests == {"cpu": 2000, "memory": GI}
    # An explicit request wins; only the resources with a limit alone take the limit.
    assert pod.containers[1].requests == {"cpu": 100, "memory": 128 * MI, "example.com/dev": 3}
    assert pod.containers[2].requests == {}
    assert pod.init_containers[0].requests == {"memory": 2 * GI}
    assert pod.pod_requests == {"cpu": 4000, "memory": 3 * GI}


def test_sidecar_init_containers_and_host_ports() -> None:
    pod = pod_from_k8s(
        minimal_pod(
            initContainers=[
                {
                    "name": "sidecar",
                    "restartPolicy": "Always",
                    "ports": [{"containerPort": 9000, "hostPort": 9000, "protocol": "UDP"}],
                    "resources": {"requests": {"cpu": "100m"}},
                },
                {"name": "setup", "resources": {"requests": {"cpu": "1"}}},
            ],
            containers=[
                {
                    "name": "main",
                    "ports": [
                        {"containerPort": 80},
                        {"containerPort": 8080, "hostPort": 80, "hostIP": "10.0.0.1"},
                        {"containerPort": 53, "hostPort": 0},
                    ],
                    "resources": {"requests": {"cpu": "500m"}},
                }
            ],
        )
    )
    sidecar, setup = pod.init_containers
    assert sidecar.is_sidecar and sidecar.restart_policy == "Always"
    assert not setup.is_sidecar and setup.restart_policy == ""
    assert sidecar.host_ports == (models.HostPort(9000, "UDP", ""),)
    assert pod.containers[0].host_ports == (models.HostPort(80, "TCP", "10.0.0.1"),)
    assert set(pod.host_ports) == {
        models.HostPort(9000, "UDP", ""),
        models.HostPort(80, "TCP", "10.0.0.1"),
    }
    # Sidecar keeps running: 100m + max(1000m init peak incl. sidecar, 500m + 100m).
    assert pod.requests == {"cpu": 1100}


def test_host_network_defaults_host_port_to_container_port() -> None:
    pod = pod_from_k8s(
        minimal_pod(
            hostNetwork=True,
            containers=[{"name": "c", "ports": [{"containerPort": 10250, "protocol": "TCP"}]}],
        )
    )
    assert pod.containers[0].host_ports == (models.HostPort(10250, "TCP", ""),)


def test_overhead_node_selector_and_node_affinity() -> None:
    pod = pod_from_k8s(
        minimal_pod(
            overhead={"cpu": "250m", "memory": "120Mi"},
            nodeSelector={"disk": "ssd"},
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                                    {"key": "cores", "operator": "Gt", "values": ["8"]},
                                ]
                            },
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}
                                ]
                            },
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 20,
                            "preference": {
                                "matchExpressions": [{"key": "gpu", "operator": "Exists"}]
                            },
                        }
                    ],
                }
            },
        )
    )
    assert pod.overhead == {"cpu": 250, "memory": 120 * MI}
    assert pod.node_selector == {"disk": "ssd"}
    assert pod.node_affinity == models.NodeAffinity(
        required=(
            models.NodeSelectorTerm(
                match_expressions=(
                    models.NodeSelectorRequirement("zone", "In", ("a", "b")),
                    models.NodeSelectorRequirement("cores", "Gt", ("8",)),
                )
            ),
            models.NodeSelectorTerm(
                match_fields=(models.NodeSelectorRequirement("metadata.name", "NotIn", ("n1",)),)
            ),
        ),
        preferred=(
            models.PreferredSchedulingTerm(
                20,
                models.NodeSelectorTerm(
                    match_expressions=(models.NodeSelectorRequirement("gpu", "Exists"),)
                ),
            ),
        ),
    )


def test_node_affinity_without_required_terms_keeps_required_none() -> None:
    pod = pod_from_k8s(minimal_pod(affinity={"nodeAffinity": {}}))
    assert pod.node_affinity == models.NodeAffinity(required=None, preferred=())


def test_pod_affinity_terms() -> None:
    term = {
        "labelSelector": {
            "matchLabels": {"app": "db"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["cache"]}],
        },
        "namespaces": ["data"],
        "namespaceSelector": {"matchLabels": {"team": "x"}},
        "topologyKey": "zone",
        "matchLabelKeys": ["pod-template-hash"],
        "mismatchLabelKeys": ["tenant"],
    }
    pod = pod_from_k8s(
        minimal_pod(
            affinity={
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 7,
                            "podAffinityTerm": {"topologyKey": "host", "namespaceSelector": {}},
                        }
                    ]
                },
            }
        )
    )
    expected_term = models.PodAffinityTerm(
        label_selector=models.LabelSelector(
            match_labels=(("app", "db"),),
            match_expressions=(models.LabelSelectorRequirement("tier", "NotIn", ("cache",)),),
        ),
        topology_key="zone",
        namespaces=("data",),
        namespace_selector=models.LabelSelector(match_labels=(("team", "x"),)),
        match_label_keys=("pod-template-hash",),
        mismatch_label_keys=("tenant",),
    )
    assert pod.pod_affinity == models.PodAffinity(required=(expected_term,))
    assert pod.pod_anti_affinity is not None
    weighted = pod.pod_anti_affinity.preferred[0]
    assert weighted.weight == 7
    # Absent labelSelector stays None (matches no pod); an empty namespaceSelector is
    # an empty selector (matches every namespace).
    assert weighted.term.label_selector is None
    assert weighted.term.namespace_selector == models.LabelSelector()


def test_tolerations_default_operator_equal() -> None:
    pod = pod_from_k8s(
        minimal_pod(
            tolerations=[{"key": "k", "value": "v", "effect": "NoSchedule"}, {"operator": "Exists"}]
        )
    )
    assert pod.tolerations == (
        models.Toleration("k", "Equal", "v", "NoSchedule", None),
        models.Toleration("", "Exists", "", "", None),
    )


def test_spread_constraint_optional_fields() -> None:
    pod = pod_from_k8s(
        minimal_pod(
            topologySpreadConstraints=[
                {
                    "maxSkew": 2,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "minDomains": 3,
                    "nodeAffinityPolicy": "Ignore",
                    "nodeTaintsPolicy": "Honor",
                    "matchLabelKeys": ["pod-template-hash"],
                }
            ]
        )
    )
    (c,) = pod.topology_spread_constraints
    assert c == models.TopologySpreadConstraint(
        max_skew=2,
        topology_key="zone",
        when_unsatisfiable="ScheduleAnyway",
        label_selector=None,
        min_domains=3,
        node_affinity_policy="Ignore",
        node_taints_policy="Honor",
        match_label_keys=("pod-template-hash",),
    )


def test_owner_is_the_controller_reference_only() -> None:
    obj = minimal_pod()
    obj["metadata"]["ownerReferences"] = [
        {"kind": "Foo", "name": "not-controller", "uid": "1"},
        {"kind": "StatefulSet", "name": "db", "uid": "2", "controller": True},
    ]
    assert pod_from_k8s(obj).owner == models.OwnerRef("StatefulSet", "db", "2", True)
    obj["metadata"]["ownerReferences"] = [{"kind": "Foo", "name": "x", "controller": False}]
    assert pod_from_k8s(obj).owner is None


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        ({"scheduling.x-k8s.io/pod-group": "g1"}, {}, models.PodGroupRef("g1", 1)),
        (
            {"scheduling.x-k8s.io/pod-group": "g1"},
            {"scheduling.x-k8s.io/min-member": "4"},
            models.PodGroupRef("g1", 4),
        ),
        (
            {"scheduling.x-k8s.io/pod-group": "g1"},
            {"splitsched.io/min-member": "3"},
            models.PodGroupRef("g1", 3),
        ),
        (
            {},
            {"splitsched.io/group": "g2", "splitsched.io/min-member": "8"},
            models.PodGroupRef("g2", 8),
        ),
        ({}, {"splitsched.io/group": "g2"}, models.PodGroupRef("g2", 1)),
        ({"app": "x"}, {"splitsched.io/min-member": "8"}, None),
    ],
)
def test_pod_group(
    labels: dict[str, str], annotations: dict[str, str], expected: models.PodGroupRef | None
) -> None:
    obj = minimal_pod()
    obj["metadata"]["labels"] = labels
    obj["metadata"]["annotations"] = annotations
    assert pod_from_k8s(obj).group == expected


# ---- pods: errors ----------------------------------------------------------------------


def with_path(obj: dict[str, Any], path: list[str | int], value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    target: Any = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


TYPICAL_ERRORS = [
    (
        ["spec", "containers", 1, "resources", "requests", "memory"],
        "12XB",
        "pod default/web-5f7c9d-abcde: spec.containers[1].resources.requests.memory: "
        "invalid quantity '12XB'",
    ),
    (
        ["spec", "containers", 0, "resources", "limits", "cpu"],
        "-1",
        "pod default/web-5f7c9d-abcde: spec.containers[0].resources.limits.cpu: "
        "quantity '-1' must not be negative",
    ),
    (["spec", "containers"], "app", "spec.containers: expected a list, got string 'app'"),
    (["spec", "tolerations", 1], "x", "spec.tolerations[1]: expected an object, got string 'x'"),
    (
        ["spec", "tolerations", 0, "operator"],
        "Maybe",
        "spec.tolerations[0].operator: unsupported value 'Maybe'",
    ),
    (
        ["spec", "tolerations", 0, "effect"],
        "NoRun",
        "spec.tolerations[0].effect: unsupported value 'NoRun'",
    ),
    (
        ["spec", "tolerations", 0, "tolerationSeconds"],
        "300",
        "spec.tolerations[0].tolerationSeconds: expected an integer",
    ),
    (["spec", "priority"], 1.5, "spec.priority: expected an integer, got number 1.5"),
    (["spec", "priority"], "10", "spec.priority: expected an integer, got string '10'"),
    (["spec", "priority"], True, "spec.priority: expected an integer, got a boolean"),
    (["spec", "priority"], 2**40, "spec.priority: 1099511627776 is out of range"),
    (
        ["spec", "preemptionPolicy"],
        "Sometimes",
        "spec.preemptionPolicy: unsupported value 'Sometimes'",
    ),
    (
        ["spec", "topologySpreadConstraints", 0, "maxSkew"],
        0,
        "spec.topologySpreadConstraints[0].maxSkew: 0 is out of range",
    ),
    (
        ["spec", "topologySpreadConstraints", 0, "whenUnsatisfiable"],
        "Whatever",
        "spec.topologySpreadConstraints[0].whenUnsatisfiable: unsupported value 'Whatever'",
    ),
    (
        ["spec", "topologySpreadConstraints", 0, "nodeAffinityPolicy"],
        "Sometimes",
        "spec.topologySpreadConstraints[0].nodeAffinityPolicy: unsupported value",
    ),
    (
        ["spec", "topologySpreadConstraints", 0, "topologyKey"],
        "",
        "spec.topologySpreadConstraints[0].topologyKey: required",
    ),
    (
        [
            "spec",
            "affinity",
            "podAntiAffinity",
            "preferredDuringSchedulingIgnoredDuringExecution",
            0,
            "podAffinityTerm",
            "labelSelector",
            "matchExpressions",
        ],
        [{"key": "a", "operator": "Gt", "values": ["1"]}],
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm"
        ".labelSelector.matchExpressions[0].operator: unsupported operator 'Gt'",
    ),
    (
        ["spec", "affinity", "nodeAffinity"],
        {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Like"}]}]
            }
        },
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].operator: unsupported operator 'Like'",
    ),
    (
        ["spec", "nodeSelector"],
        {"disk": 1},
        "spec.nodeSelector[disk]: expected a string, got number 1",
    ),
    (["metadata", "labels"], ["app"], "metadata.labels: expected a map of strings, got a list"),
    (
        ["metadata", "creationTimestamp"],
        "yesterday",
        "metadata.creationTimestamp: invalid RFC3339 timestamp 'yesterday'",
    ),
    (
        ["spec", "containers", 0, "ports", 0, "hostPort"],
        70000,
        "spec.containers[0].ports[0].hostPort: 70000 is out of range",
    ),
    (["spec", "overhead"], "1", "spec.overhead: expected a map of quantities, got string '1'"),
    (
        ["metadata", "annotations"],
        {"splitsched.io/group": "g", "splitsched.io/min-member": "0"},
        "metadata.annotations[splitsched.io/min-member]: expected a positive integer, got '0'",
    ),
]


@pytest.mark.parametrize(("path", "value", "message"), TYPICAL_ERRORS)
def test_errors_name_object_and_field(path: list[str | int], value: Any, message: str) -> None:
    obj = with_path(typical_pod(), path, value)
    with pytest.raises(ConversionError) as info:
        pod_from_k8s(obj)
    text = str(info.value)
    assert text.startswith("pod default/web-5f7c9d-abcde: ")
    assert message in text
    assert isinstance(info.value, ValueError)


def test_missing_name_and_metadata() -> None:
    with pytest.raises(ConversionError, match=r"^pod default/<unnamed>: metadata.name: required$"):
        pod_from_k8s({"metadata": {"namespace": "default"}})
    with pytest.raises(ConversionError, match=r"metadata: expected an object, got null"):
        pod_from_k8s({"spec": {}})
    with pytest.raises(ConversionError, match=r"metadata.name: expected a non-empty string"):
        pod_from_k8s({"metadata": {"name": 5}})


def test_non_strict_returns_best_effort_pod_with_reason() -> None:
    obj = with_path(
        typical_pod(), ["spec", "containers", 1, "resources", "requests", "memory"], "12XB"
    )
    obj["spec"]["nodeName"] = "n7"
    obj["spec"]["priority"] = 100
    pod = pod_from_k8s(obj, strict=False)
    assert pod.invalid_reason == (
        "pod default/web-5f7c9d-abcde: spec.containers[1].resources.requests.memory: "
        "invalid quantity '12XB'"
    )
    assert (pod.uid, pod.namespace, pod.name) == (
        "1d2c3b4a-0000-4000-8000-000000000001",
        "default",
        "web-5f7c9d-abcde",
    )
    assert pod.labels["app"] == "web"
    assert pod.scheduler_name == "default-scheduler"
    assert pod.node_name == "n7" and pod.priority == 100
    assert pod.resource_version == "48213"
    assert pod.containers == ()


def test_non_strict_on_garbage() -> None:
    pod = pod_from_k8s("not a pod", strict=False)  # type: ignore[arg-type]
    assert pod.invalid_reason.startswith("pod ")
    assert pod.name == ""
    pod = pod_from_k8s({"metadata": {"name": "x", "labels": "oops"}, "spec": []}, strict=False)
    assert pod.name == "x" and pod.labels == {}
    assert "metadata.labels" in pod.invalid_reason


# Mutations for the property test: wrong types, garbage strings, huge numbers.
GARBAGE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63 - 10, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "1e400", "99999999999Ei", "-1", "Exists", "In", "Always", "12XB", "0"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.just({"a": {"b": [1, "x", None]}}),
)


def leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            paths.extend(leaf_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            paths.extend(leaf_paths(v, (*prefix, i)))
    return paths


TYPICAL_PATHS = leaf_paths(typical_pod())


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TYPICAL_PATHS), GARBAGE), min_size=1, max_size=4))
def test_mutated_pods_never_raise_anything_else(
    mutations: list[tuple[tuple[Any, ...], Any]],
) -> None:
    obj = typical_pod()
    for path, value in mutations:
        target: Any = obj
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation replaced a parent
    pod = pod_from_k8s(obj, strict=False)
    assert isinstance(pod, models.Pod)
    try:
        strict = pod_from_k8s(obj)
    except ConversionError as e:
        assert pod.invalid_reason == str(e)
    else:
        assert pod.invalid_reason == "" and pod == strict
        for amount in pod.requests.values():
            assert isinstance(amount, int) and 0 <= amount < 2**63


# ---- nodes -------------------------------------------------------------------------------


def test_node_fields() -> None:
    node = node_from_k8s(
        {
            "metadata": {
                "name": "n1",
                "uid": "u1",
                "resourceVersion": "77",
                "labels": {"zone": "a"},
                "annotations": {"note": "x"},
            },
            "spec": {
                "unschedulable": True,
                "taints": [
                    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                    {
                        "key": "node.kubernetes.io/not-ready",
                        "effect": "NoExecute",
                        "timeAdded": "2025-01-01T00:00:00Z",
                    },
                ],
            },
            "status": {
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "allocatable": {
                    "cpu": "7910m",
                    "memory": "31Gi",
                    "pods": "110",
                    "nvidia.com/gpu": "2",
                },
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": "False"},
                ],
            },
        }
    )
    assert node.name == "n1" and node.uid == "u1" and node.resource_version == "77"
    assert node.labels == {"zone": "a"} and node.annotations == {"note": "x"}
    assert node.taints == (
        models.Taint("dedicated", "gpu", "NoSchedule"),
        models.Taint("node.kubernetes.io/not-ready", "", "NoExecute"),
    )
    assert node.allocatable == {"cpu": 7910, "memory": 31 * GI, "pods": 110, "nvidia.com/gpu": 2}
    assert node.unschedulable
    assert not node.ready


def test_node_images_keep_every_name_and_the_size() -> None:
    node = node_from_k8s(
        {
            "metadata": {"name": "n"},
            "status": {
                "images": [
                    {"names": ["nginx@sha256:0f", "nginx:1.27"], "sizeBytes": 70_000_000},
                    {"names": ["pause:3.10"]},
                ]
            },
        }
    )
    assert node.images == (
        models.ContainerImage(("nginx@sha256:0f", "nginx:1.27"), 70_000_000),
        models.ContainerImage(("pause:3.10",), 0),
    )
    assert node_from_k8s({"metadata": {"name": "bare"}}).images == ()


def test_container_images_and_image_volumes() -> None:
    obj = with_path(typical_pod(), ["spec", "volumes"], [
        {"name": "cache", "emptyDir": {}},
        {"name": "model", "image": {"reference": "models/llm:7b", "pullPolicy": "IfNotPresent"}},
    ])  # fmt: skip
    obj["spec"]["containers"][0]["image"] = "registry.example/web:2"
    pod = pod_from_k8s(obj)
    assert pod.containers[0].image == "registry.example/web:2"
    assert pod.image_volumes == ("models/llm:7b",)
    bad = with_path(obj, ["spec", "volumes", 1, "image", "reference"], 7)
    with pytest.raises(ConversionError, match=r"volumes\[1\].image.reference: expected a str"):
        pod_from_k8s(bad)


def test_node_falls_back_to_capacity_and_defaults_ready() -> None:
    node = node_from_k8s(
        {"metadata": {"name": "n2"}, "status": {"capacity": {"cpu": "4", "memory": "8Gi"}}}
    )
    assert node.allocatable == {"cpu": 4000, "memory": 8 * GI}
    assert node.ready and not node.unschedulable and node.taints == ()
    ready = node_from_k8s(
        {
            "metadata": {"name": "n3"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    assert ready.ready


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"metadata": {}}, "node <unnamed>: metadata.name: required"),
        (
            {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "lots"}}},
            "node n: status.allocatable.cpu: invalid quantity 'lots'",
        ),
        (
            {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}},
            "node n: spec.taints[0].effect: unsupported value 'Sometimes'",
        ),
        (
            {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k"}]}},
            "node n: spec.taints[0].effect: required",
        ),
        (
            {"metadata": {"name": "n"}, "spec": {"taints": "k=v:NoSchedule"}},
            "node n: spec.taints: expected a list",
        ),
        (
            {"metadata": {"name": "n"}, "spec": {"unschedulable": "yes"}},
            "node n: spec.unschedulable: expected a boolean",
        ),
        (
            {"metadata": {"name": "n"}, "status": {"capacity": {"memory": "1e400"}}},
            "node n: status.capacity.memory: quantity '1e400' out of range",
        ),
        (
            {"metadata": {"name": "n"}, "status": {"images": [{"names": "nginx"}]}},
            "node n: status.images[0].names: expected a list",
        ),
        (
            {"metadata": {"name": "n"}, "status": {"images": [{"sizeBytes": -1}]}},
            "node n: status.images[0].sizeBytes: -1 is out of range",
        ),
    ],
)
def test_node_errors(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ConversionError) as info:
        node_from_k8s(obj)
    assert str(info.value).startswith(message)


# ---- cluster files -----------------------------------------------------------------------


def test_load_cluster_yaml_list() -> None:
    nodes, pods = load_cluster((DATA / "cluster.yaml").read_text())
    assert [n.name for n in nodes] == ["node-a", "node-b"]
    a, b = nodes
    assert a.allocatable == {
        "cpu": 3900,
        "ephemeral-storage": 95551679124,
        "hugepages-2Mi": 0,
        "memory": 15 * GI,
        "pods": 110,
    }
    assert a.ready and not a.unschedulable and a.labels["topology.kubernetes.io/zone"] == "zone-1"
    assert b.allocatable == {
        "cpu": 8000,
        "memory": 32 * GI,
        "nvidia.com/gpu": 2,
        "pods": 110,
    }  # capacity
    assert not b.ready and b.unschedulable
    assert b.taints[0] == models.Taint("nvidia.com/gpu", "present", "NoSchedule")

    assert [p.key for p in pods] == [
        "default/web-7d4b9c-x2x9q",
        "ml/trainer-0",
    ]  # the Service is skipped
    web, trainer = pods
    assert web.node_name == "node-a" and web.phase == "Running"
    assert web.containers[0].requests == {"cpu": 250, "memory": 256 * MI}  # memory from its limit
    assert web.containers[0].host_ports == (models.HostPort(443, "TCP", ""),)
    assert web.owner == models.OwnerRef(
        "ReplicaSet", "web-7d4b9c", "6f6a1d2e-1111-4000-8000-000000000001", True
    )
    assert trainer.scheduler_name == "splitsched" and trainer.priority == 1000
    assert trainer.group == models.PodGroupRef("train-1", 4)
    assert trainer.init_containers[0].is_sidecar and not trainer.init_containers[1].is_sidecar
    assert trainer.containers[0].requests == {"cpu": 2000, "memory": 8 * GI, "nvidia.com/gpu": 1}
    # 100m sidecar + 2 cpu; the 1-cpu init container (plus the sidecar) peaks below that.
    assert trainer.requests == {"cpu": 2100, "memory": 8 * GI + 64 * MI, "nvidia.com/gpu": 1}
    assert trainer.node_selector == {"nvidia.com/gpu.present": "true"}
    assert trainer.creation_timestamp == 1740823380.0  # 2025-03-01T10:03:00Z


def test_load_cluster_json_and_typed_lists_match_yaml() -> None:
    import yaml

    doc = yaml.safe_load((DATA / "cluster.yaml").read_text())
    expected = load_cluster((DATA / "cluster.yaml").read_text())
    assert load_cluster(json.dumps(doc)) == expected
    # NodeList/PodList items carry no kind; the list's kind implies it.
    node_items = [
        {k: v for k, v in i.items() if k != "kind"} for i in doc["items"] if i["kind"] == "Node"
    ]
    pod_items = [
        {k: v for k, v in i.items() if k != "kind"} for i in doc["items"] if i["kind"] == "Pod"
    ]
    text = yaml.safe_dump({"kind": "NodeList", "items": node_items}) + "---\n"
    text += yaml.safe_dump({"kind": "PodList", "items": pod_items})
    assert load_cluster(text) == expected


def test_load_cluster_multi_document_single_objects() -> None:
    text = """
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "2"}}
---
---
kind: Pod
metadata: {name: p1, namespace: team, creationTimestamp: 2025-01-01T00:00:00Z}
spec:
  containers: [{name: c, resources: {requests: {cpu: 0.5, memory: 100}}}]
---
kind: ConfigMap
metadata: {name: cm}
"""
    nodes, pods = load_cluster(text)
    assert nodes == [models.Node(name="n1", allocatable={"cpu": 2000})]
    assert pods[0].key == "team/p1"
    assert pods[0].containers[0].requests == {"cpu": 500, "memory": 100}  # YAML numbers
    assert pods[0].creation_timestamp == 1735689600.0  # unquoted YAML timestamp


def test_load_cluster_errors_name_the_item() -> None:
    text = (DATA / "cluster.yaml").read_text().replace("cpu: 250m", "cpu: 250XB")
    with pytest.raises(ConversionError) as info:
        load_cluster(text)
    assert str(info.value) == (
        "items[2] (Pod default/web-7d4b9c-x2x9q): spec.containers[0].resources.requests.cpu: "
        "invalid quantity '250XB'"
    )
    with pytest.raises(
        ConversionError, match=r"^items\[0\] \(Node <unnamed>\): metadata.name: required$"
    ):
        load_cluster('{"kind": "List", "items": [{"kind": "Node", "metadata": {}}]}')
    with pytest.raises(ConversionError, match=r"^documents\[1\]: missing kind$"):
        load_cluster("kind: Node\nmetadata: {name: a}\n---\nmetadata: {name: b}\n")
    with pytest.raises(ConversionError, match="invalid YAML"):
        load_cluster("kind: [unclosed")


def test_fast_constructors_build_equal_objects_with_defaults() -> None:

    assert fast.Toleration(key="k") == models.Toleration("k")
    assert fast.Pod(uid="u", namespace="n", name="p") == models.Pod("u", "n", "p")
    pod = fast.Pod(
        uid="u", namespace="n", name="p", containers=(models.Container("c", {"cpu": 5}),)
    )
    other = fast.Pod(uid="u", namespace="n", name="p")
    assert pod.labels is not other.labels  # default_factory: a fresh dict each time
    assert pod.requests == {"cpu": 5}  # the init=False cache slot is initialised
    assert hash(fast.Taint(key="a", value="b", effect="NoSchedule")) == hash(
        models.Taint("a", "b", "NoSchedule")
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        pod.name = "x"  # type: ignore[misc]


def test_requests_summed_past_int64_saturate() -> None:
    """Found by the mutation test above: two containers whose memory each fits in int64
    summed to 2**63, which the node table's int64 columns cannot hold."""
    obj = typical_pod()
    for container in obj["spec"]["containers"]:
        container["resources"] = {"requests": {"memory": str(2**62 + 2**61)}}
    pod = pod_from_k8s(obj)
    assert len(obj["spec"]["containers"]) >= 2
    assert pod.requests["memory"] == 2**63 - 1
