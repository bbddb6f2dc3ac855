"""API JSON of claims, volumes, classes and CSINodes -> storage values: the fields the
volume plugins read, Kubernetes' defaults, and objects that cannot be read keeping their
identity and an `invalid_reason` (a StorageClass raises instead). Also the pod's volumes:
only those reaching a claim."""

from __future__ import annotations

from typing import Any

import pytest

from splitsched.core import models, storage
from splitsched.core.convert import ConversionError, pod_from_k8s
from splitsched.core.convert.storage import (
    claim_from_k8s,
    class_from_k8s,
    csi_node_from_k8s,
    volume_from_k8s,
)

CLAIM: dict[str, Any] = {
    "metadata": {
        "name": "data", "namespace": "team", "uid": "u1", "resourceVersion": "7",
        "annotations": {"volume.kubernetes.io/selected-node": "node-a", "other": "x"},
    },
    "spec": {
        "storageClassName": "fast", "accessModes": ["ReadWriteOncePod"],
        "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}},
        "selector": {"matchLabels": {"tier": "hot"}}, "volumeName": "pv-1",
        "volumeMode": "Block",
    },
    "status": {"phase": "Bound", "conditions": [{"type": "Resizing"}]},
}  # fmt: skip


def test_a_claim() -> None:
    assert claim_from_k8s(CLAIM) == storage.PersistentVolumeClaim(
        namespace="team", name="data", uid="u1", resource_version="7",
        storage_class_name="fast", has_storage_class=True,
        access_modes=("ReadWriteOncePod",), request_bytes=2**30, volume_name="pv-1",
        phase="Bound", selector=models.LabelSelector(match_labels=(("tier", "hot"),)),
        selected_node="node-a", volume_mode="Block",
    )  # fmt: skip


def test_claim_defaults() -> None:
    c = claim_from_k8s({"metadata": {"name": "c"}, "spec": {}})
    assert (c.namespace, c.storage_class_name, c.has_storage_class) == ("default", "", False)
    assert (c.phase, c.volume_mode, c.selector, c.request_bytes) == ("Pending", "Filesystem",
                                                                       None, 0)  # fmt: skip
    # "" is a class name too: static volumes without a class only.
    assert claim_from_k8s({"metadata": {"name": "c"}, "spec": {"storageClassName": ""}}
                          ).has_storage_class  # fmt: skip


def test_the_beta_class_annotation_wins() -> None:
    beta = {"volume.beta.kubernetes.io/storage-class": "old"}
    c = claim_from_k8s({"metadata": {"name": "c", "annotations": beta},
                        "spec": {"storageClassName": "new"}})  # fmt: skip
    assert c.storage_class_name == "old"
    v = volume_from_k8s({"metadata": {"name": "v", "annotations": beta},
                         "spec": {"storageClassName": "new"}})  # fmt: skip
    assert v.storage_class_name == "old"


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"resources": {"requests": {"storage": "12XB"}}},
         "spec.resources.requests.storage: invalid quantity '12XB'"),
        ({"accessModes": "ReadWriteOnce"}, "spec.accessModes: expected a list, got string"),
        ({"selector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}},
         "spec.selector.matchExpressions[0].operator: unsupported operator 'Near'"),
    ],
)  # fmt: skip
def test_a_claim_that_cannot_be_read_keeps_its_identity(spec: dict[str, Any], reason: str) -> None:
    c = claim_from_k8s({"metadata": {"name": "c", "namespace": "ns", "uid": "u",
                                     "resourceVersion": "3"}, "spec": spec})  # fmt: skip
    assert (c.key, c.uid, c.resource_version) == (("ns", "c"), "u", "3")
    assert c.invalid_reason.startswith(reason)


VOLUME: dict[str, Any] = {
    "metadata": {"name": "pv-1", "uid": "u", "resourceVersion": "4",
                 "labels": {"topology.kubernetes.io/zone": "z1"}},
    "spec": {
        "storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "10Gi"},
        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "team", "name": "data",
                     "uid": "u1"},
        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}},
    },
    "status": {"phase": "Bound"},
}  # fmt: skip


def test_a_volume() -> None:
    term = models.NodeSelectorTerm((models.NodeSelectorRequirement("zone", "In", ("z1",)),))
    assert volume_from_k8s(VOLUME) == storage.PersistentVolume(
        name="pv-1", uid="u", resource_version="4",
        labels={"topology.kubernetes.io/zone": "z1"}, storage_class_name="fast",
        access_modes=("ReadWriteOnce",), capacity_bytes=10 * 2**30, node_affinity=(term,),
        claim_ref=storage.ClaimRef("team", "data", "u1"), phase="Bound",
        csi_driver="ebs.csi.aws.com",
    )  # fmt: skip


def test_volume_node_affinity_none_versus_no_terms() -> None:
    assert volume_from_k8s({"metadata": {"name": "v"}, "spec": {}}).node_affinity is None
    assert volume_from_k8s({"metadata": {"name": "v"},
                            "spec": {"nodeAffinity": {}}}).node_affinity is None  # fmt: skip
    no_terms: dict[str, Any] = {"nodeAffinity": {"required": {"nodeSelectorTerms": []}}}
    assert volume_from_k8s({"metadata": {"name": "v"}, "spec": no_terms}).node_affinity == ()


def test_a_volume_with_a_malformed_node_affinity_is_invalid() -> None:
    bad = {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "Near"}]}]}}}  # fmt: skip
    v = volume_from_k8s({"metadata": {"name": "v", "resourceVersion": "2"}, "spec": bad})
    assert (v.name, v.resource_version) == ("v", "2")
    assert v.invalid_reason == (
        "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator: "
        "unsupported operator 'Near'"
    )


def test_a_storage_class() -> None:
    cls = class_from_k8s({
        "metadata": {"name": "local", "resourceVersion": "1",
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}],
    })  # fmt: skip
    assert cls == storage.StorageClass(
        name="local", resource_version="1", provisioner="kubernetes.io/no-provisioner",
        volume_binding_mode="WaitForFirstConsumer",
        allowed_topologies=((storage.TopologySelectorRequirement("zone", ("a",)),),),
        is_default=True,
    )  # fmt: skip
    assert not cls.can_provision and cls.waits_for_first_consumer
    plain = class_from_k8s({"metadata": {"name": "p"}, "provisioner": "x"})
    assert plain.volume_binding_mode == "Immediate" and plain.can_provision


def test_a_storage_class_that_cannot_be_read_raises() -> None:
    with pytest.raises(ConversionError, match=r"storageclass bad: allowedTopologies"):
        class_from_k8s({"metadata": {"name": "bad"}, "allowedTopologies": "zone"})


def test_a_csi_node() -> None:
    node = csi_node_from_k8s({
        "metadata": {"name": "n1", "resourceVersion": "5"},
        "spec": {"drivers": [
            {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}},
            {"name": "no-limit.csi", "nodeID": "i-1"},
        ]},
    })  # fmt: skip
    assert node == storage.CSINode("n1", "5", {"ebs.csi.aws.com": 25})


def test_a_csi_node_with_a_negative_count_is_invalid() -> None:
    node = csi_node_from_k8s({"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "d", "nodeID": "x", "allocatable": {"count": -1}}]}})  # fmt: skip
    assert node.name == "n1" and not node.allocatable
    assert node.invalid_reason == "spec.drivers[0].allocatable.count: -1 is out of range " \
                                  "[0, 2147483647]"  # fmt: skip


def test_a_pods_claim_volumes_only() -> None:
    pod = pod_from_k8s({
        "metadata": {"name": "web-0", "namespace": "team"},
        "spec": {"containers": [], "volumes": [
            {"name": "token", "projected": {"sources": []}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0",
                                                       "readOnly": True}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "cfg", "configMap": {"name": "c"}},
        ]},
    })  # fmt: skip
    assert pod.volumes == (
        models.PodVolume("data", "data-web-0", ephemeral=False, read_only=True),
        models.PodVolume("scratch", "web-0-scratch", ephemeral=True),
    )


def test_a_malformed_claim_volume_makes_the_pod_invalid() -> None:
    pod = pod_from_k8s(
        {
            "metadata": {"name": "p"},
            "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": 3}}]},
        },
        strict=False,
    )
    assert pod.invalid_reason == (
        "pod default/p: spec.volumes[0].persistentVolumeClaim.claimName: expected a string, "
        "got number 3"
    )
