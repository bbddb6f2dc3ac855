"""The watcher's storage: PVCs, PVs, StorageClasses and CSINodes converted to hub entries
(keyed by namespace/name or name), their updates that change nothing streamed absorbed, and
the objects it cannot read streamed with a reason (or, for a StorageClass, skipped)."""

from __future__ import annotations

import copy
from typing import Any

from services.watcher import entries, listwatch, metrics, ring
from splitsched import wire_storage
from splitsched.core import storage
from splitsched.runtime import kubeclient
from splitsched.v1 import watcher_pb2

NOW = 1_700_000_000.0


def decoded(entry: ring.Entry | None) -> storage.StorageObject | None:
    assert entry is not None
    event = watcher_pb2.ClusterEvent.FromString(ring._header(1, ring.ADDED) + entry.body)
    return wire_storage.storage_from_event(event)


def pvc_json(rv: str = "1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "data", "namespace": "team", "uid": "u-pvc", "resourceVersion": rv,
                     "annotations": {"example.com/token": "s3cr3t"}},
        "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}, **spec},
        "status": {"phase": "Pending"},
    }  # fmt: skip


def reflector(resource: listwatch.Resource, hub: ring.ClusterHub) -> listwatch.Reflector:
    return listwatch.Reflector(
        resource=resource,
        hub=hub,
        converter=entries.Converter(),
        endpoint=kubeclient.KubeEndpoint(host="http://127.0.0.1:1", auth_header=lambda: ""),
        session=None,  # type: ignore[arg-type]  # handle_event does no I/O
        metrics=metrics.Metrics(None),
    )


def by_name(name: str) -> listwatch.Resource:
    return next(r for r in listwatch.STORAGE if r.name == name)


def test_each_kind_becomes_an_entry_keyed_as_its_scope() -> None:
    conv = entries.Converter()
    pvc = conv.pvc(pvc_json(), NOW)
    assert pvc is not None and (pvc.kind, pvc.key, pvc.uid) == (ring.PVC, "team/data", "u-pvc")
    claim = decoded(pvc)
    assert isinstance(claim, storage.PersistentVolumeClaim) and claim.request_bytes == 2**30
    assert b"s3cr3t" not in pvc.body  # annotations other than selected-node stay behind
    pv = conv.pv(
        {
            "metadata": {"name": "pv-1", "uid": "u-pv"},
            "spec": {
                "csi": {
                    "driver": "d",
                    "volumeHandle": "h",
                    "volumeAttributes": {"secret": "s3cr3t"},
                }
            },
        },
        NOW,
    )
    assert pv is not None and (pv.kind, pv.key, pv.uid) == (ring.PV, "pv-1", "u-pv")
    assert b"s3cr3t" not in pv.body
    cls = conv.storage_class(
        {
            "metadata": {"name": "local", "uid": "u-sc"},
            "provisioner": "p",
            "parameters": {"key": "s3cr3t"},
        },
        NOW,
    )
    assert cls is not None and (cls.kind, cls.key, cls.uid) == (ring.STORAGE_CLASS, "local", "u-sc")
    assert b"s3cr3t" not in cls.body
    csi = conv.csi_node(
        {
            "metadata": {"name": "n1", "uid": "u-csi"},
            "spec": {"drivers": [{"name": "d", "nodeID": "s3cr3t", "allocatable": {"count": 2}}]},
        },
        NOW,
    )
    assert csi is not None and (csi.kind, csi.key) == (ring.CSI_NODE, "n1")
    assert decoded(csi) == storage.CSINode("n1", "", {"d": 2})
    assert b"s3cr3t" not in csi.body


def test_objects_that_cannot_be_read() -> None:
    conv = entries.Converter()
    bad = conv.pvc(pvc_json(resources={"requests": {"storage": "lots"}}), NOW)
    claim = decoded(bad)
    assert isinstance(claim, storage.PersistentVolumeClaim)
    assert claim.key == ("team", "data") and "invalid quantity 'lots'" in claim.invalid_reason
    negative = conv.csi_node({"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "d", "allocatable": {"count": -3}}]}}, NOW)  # fmt: skip
    node = decoded(negative)
    assert isinstance(node, storage.CSINode) and "-3 is out of range" in node.invalid_reason
    assert conv.storage_class({"metadata": {"name": "x"}, "allowedTopologies": 3}, NOW) is None


def test_an_update_that_changes_nothing_streamed_is_absorbed() -> None:
    hub = ring.ClusterHub(ring_size=10, first_sequence=1)
    r = reflector(by_name("persistentvolumeclaims"), hub)
    r.handle_event({"type": "ADDED", "object": pvc_json("1")})
    assert hub.get(ring.PVC, "team/data") is not None and hub.last_sequence == 1
    status_only = pvc_json("2")
    status_only["status"]["conditions"] = [{"type": "Resizing", "status": "True"}]
    status_only["metadata"]["annotations"]["example.com/token"] = "rotated"
    r.handle_event({"type": "MODIFIED", "object": status_only})
    assert hub.last_sequence == 1 and hub.absorbed == 1
    selected = copy.deepcopy(status_only)
    selected["metadata"]["resourceVersion"] = "3"
    selected["metadata"]["annotations"][storage.SELECTED_NODE] = "node-a"
    r.handle_event({"type": "MODIFIED", "object": selected})
    assert hub.last_sequence == 2
    r.handle_event({"type": "DELETED", "object": selected})
    assert hub.get(ring.PVC, "team/data") is None and hub.last_sequence == 3


def test_cluster_scoped_kinds_are_keyed_by_name() -> None:
    hub = ring.ClusterHub(ring_size=10, first_sequence=1)
    for name, obj in [
        ("persistentvolumes", {"metadata": {"name": "pv-1", "resourceVersion": "1"}}),
        ("storageclasses", {"metadata": {"name": "local", "resourceVersion": "1"}}),
        ("csinodes", {"metadata": {"name": "n1", "resourceVersion": "1"}}),
    ]:
        resource = by_name(name)
        assert not resource.namespaced
        reflector(resource, hub).handle_event({"type": "ADDED", "object": obj})
        assert hub.get(resource.kind, obj["metadata"]["name"]) is not None
    assert by_name("persistentvolumeclaims").namespaced
