"""The watcher's DRA objects: DeviceClasses, ResourceSlices and ResourceClaims converted to
hub entries (claims keyed by namespace/name, the others by name), updates that change
nothing streamed absorbed, and objects it cannot read streamed with a reason (or, for a
DeviceClass, skipped)."""

from __future__ import annotations

import copy
from typing import Any

from services.watcher import entries, listwatch, metrics, ring
from splitsched import wire_devices
from splitsched.core.devices import model
from splitsched.runtime import kubeclient
from splitsched.v1 import watcher_pb2

NOW = 1_700_000_000.0


def decoded(entry: ring.Entry | None) -> wire_devices.DeviceObject | None:
    assert entry is not None
    event = watcher_pb2.ClusterEvent.FromString(ring._header(1, ring.ADDED) + entry.body)
    return wire_devices.devices_from_event(event)


def slice_json(rv: str = "1", memory: str = "80Gi") -> dict[str, Any]:
    return {
        "metadata": {"name": "n1-gpus", "uid": "u-s", "resourceVersion": rv},
        "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "A100"}},
                              "capacity": {"memory": {"value": memory}}}]},
    }  # fmt: skip


def claim_json(rv: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ml", "uid": "u-c", "resourceVersion": rv,
                     "annotations": {"example.com/token": "s3cr3t"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {},
    }  # fmt: skip


def test_each_kind_becomes_an_entry_keyed_as_its_scope() -> None:
    conv = entries.Converter()
    s = conv.resource_slice(slice_json(), NOW)
    assert s is not None and (s.kind, s.key, s.uid) == (ring.RESOURCE_SLICE, "n1-gpus", "u-s")
    got = decoded(s)
    assert isinstance(got, model.ResourceSlice)
    assert got.devices[0].attributes == {"gpu.example.com/model": "A100"}
    c = conv.resource_claim(claim_json(), NOW)
    assert c is not None and (c.kind, c.key) == (ring.RESOURCE_CLAIM, "ml/c")
    assert b"s3cr3t" not in c.body
    claim = decoded(c)
    assert isinstance(claim, model.ResourceClaim) and claim.requests[0].name == "gpu"
    cls = conv.device_class(
        {"metadata": {"name": "gpu", "uid": "u-d"},
         "spec": {"selectors": [{"cel": {"expression": "true"}}]}},
        NOW,
    )  # fmt: skip
    assert cls is not None and (cls.kind, cls.key) == (ring.DEVICE_CLASS, "gpu")
    assert decoded(cls) == model.DeviceClass("gpu", ("true",))


def test_objects_that_cannot_be_read() -> None:
    conv = entries.Converter()
    bad = decoded(conv.resource_slice(slice_json(memory="lots"), NOW))
    assert isinstance(bad, model.ResourceSlice)
    assert (bad.driver, bad.pool, bad.node_name) == ("gpu.example.com", "n1", "n1")
    assert "capacity[memory].value" in bad.invalid_reason and bad.devices == ()
    broken = claim_json()
    broken["spec"]["devices"]["requests"] = "gpu"
    claim = decoded(conv.resource_claim(broken, NOW))
    assert isinstance(claim, model.ResourceClaim) and claim.key == "ml/c"
    assert "spec.devices.requests: expected a list" in claim.invalid_reason
    bad_class = {"metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {"expression": 1}}]}}
    assert conv.device_class(bad_class, NOW) is None


def reflector(resource: listwatch.Resource, hub: ring.ClusterHub) -> listwatch.Reflector:
    return listwatch.Reflector(
        resource=resource,
        hub=hub,
        converter=entries.Converter(),
        endpoint=kubeclient.KubeEndpoint(host="http://127.0.0.1:1", auth_header=lambda: ""),
        session=None,  # type: ignore[arg-type]  # handle_event does no I/O
        metrics=metrics.Metrics(None),
    )


def test_an_update_that_changes_nothing_streamed_is_absorbed() -> None:
    hub = ring.ClusterHub(ring_size=10, first_sequence=1)
    claims = next(r for r in listwatch.DEVICES if r.name == "resourceclaims")
    r = reflector(claims, hub)
    r.handle_event({"type": "ADDED", "object": claim_json("1")})
    assert hub.get(ring.RESOURCE_CLAIM, "ml/c") is not None and hub.last_sequence == 1
    device_status = claim_json("2")
    device_status["status"]["devices"] = [{"driver": "d", "pool": "p", "device": "g"}]
    r.handle_event({"type": "MODIFIED", "object": device_status})
    assert hub.last_sequence == 1 and hub.absorbed == 1
    reserved = copy.deepcopy(device_status)
    reserved["metadata"]["resourceVersion"] = "3"
    reserved["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u-p"}]
    r.handle_event({"type": "MODIFIED", "object": reserved})
    assert hub.last_sequence == 2
    r.handle_event({"type": "DELETED", "object": reserved})
    assert hub.get(ring.RESOURCE_CLAIM, "ml/c") is None and hub.last_sequence == 3


def test_the_device_resources_are_optional_and_scoped_as_kube_scopes_them() -> None:
    scopes = {r.name: (r.namespaced, r.optional) for r in listwatch.DEVICES}
    assert scopes == {
        "deviceclasses": (False, True),
        "resourceslices": (False, True),
        "resourceclaims": (True, True),
    }
    assert all(r.path.startswith("/apis/resource.k8s.io/v1/") for r in listwatch.DEVICES)


def test_a_pods_claim_status_is_a_delta_not_absorbed() -> None:
    """kube-controller-manager records the claim it made from a template in the pod's
    status.resourceClaimStatuses: the scheduler must see that update to find the claim."""
    conv = entries.Converter()
    hub = ring.ClusterHub(ring_size=10, first_sequence=1)
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ml", "uid": "u-p", "resourceVersion": "1"},
        "spec": {"containers": [{"name": "c"}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}]},
        "status": {"phase": "Pending"},
    }  # fmt: skip
    first = conv.pod(pod, NOW)
    assert first is not None and hub.upsert(first) == ring.ADDED
    made = copy.deepcopy(pod)
    made["metadata"]["resourceVersion"] = "2"
    made["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]
    assert entries.raw_pod_fingerprint(made) != first.raw_fingerprint
    second = conv.pod(made, NOW)
    assert second is not None and hub.upsert(second) == ring.MODIFIED
    event = watcher_pb2.ClusterEvent.FromString(ring._header(2, ring.MODIFIED) + second.body)
    assert [c.claim_name for c in event.pod.resource_claims] == ["p-gpu-x"]
