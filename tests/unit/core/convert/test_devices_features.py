"""The DRA fields kube v1.36 reads by default (device taints, partitionable devices,
consumable capacity, binding conditions) read from API JSON, and what an unreadable claim
or slice still keeps: a claim its allocation and reservations, a slice its place."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import yaml

from splitsched.core import models
from splitsched.core.convert.devices import claim_from_k8s, slice_from_k8s
from splitsched.core.devices import model
from splitsched.core.devices.view import DeviceView

GI = 2**30

PARTITIONED = yaml.safe_load(
    """
metadata: {name: node-1-gpus, resourceVersion: "3"}
spec:
  driver: gpu.example.com
  pool: {name: node-1, generation: 2, resourceSliceCount: 2}
  nodeName: node-1
  devices:
  - name: gpu-0-half-0
    capacity: {memory: {value: 40Gi}}
    consumesCounters:
    - counterSet: gpu-0
      counters: {memory: {value: 40Gi}, sms: {value: "54"}}
    taints:
    - {key: example.com/unhealthy, value: ecc, effect: NoExecute, timeAdded: "2025-01-01T00:00:00Z"}
    - {key: example.com/note, effect: None}
    bindingConditions: [dra.example.com/attached]
    bindingFailureConditions: [dra.example.com/failed]
    bindsToNode: true
  - name: nic-0
    allowMultipleAllocations: true
"""
)

COUNTERS = yaml.safe_load(
    """
metadata: {name: node-1-counters}
spec:
  driver: gpu.example.com
  pool: {name: node-1, generation: 2, resourceSliceCount: 2}
  nodeName: node-1
  sharedCounters:
  - name: gpu-0
    counters: {memory: {value: 80Gi}, sms: {value: "108"}}
"""
)


def test_a_device_reads_its_taints_counters_sharing_and_binding_conditions() -> None:
    half, nic = slice_from_k8s(PARTITIONED).devices
    assert half.taints == (
        model.DeviceTaint("example.com/unhealthy", "ecc", "NoExecute"),
        model.DeviceTaint("example.com/note", "", "None"),
    )
    assert half.consumes_counters == (
        model.CounterSet("gpu-0", {"memory": Fraction(40 * GI), "sms": Fraction(54)}),
    )
    assert half.binding_conditions == ("dra.example.com/attached",)
    assert half.binding_failure_conditions == ("dra.example.com/failed",)
    assert (half.binds_to_node, half.allow_multiple_allocations) == (True, False)
    assert (nic.allow_multiple_allocations, nic.taints, nic.binds_to_node) == (True, (), False)


def test_a_counter_slice_reads_its_shared_counters() -> None:
    s = slice_from_k8s(COUNTERS)
    assert s.invalid_reason == ""
    assert s.devices == ()
    assert s.shared_counters == (
        model.CounterSet("gpu-0", {"memory": Fraction(80 * GI), "sms": Fraction(108)}),
    )


def test_a_bad_taint_or_counter_makes_the_slice_unreadable() -> None:
    raw = json.loads(json.dumps(PARTITIONED))
    raw["spec"]["devices"][0]["taints"][0]["effect"] = None
    assert "spec.devices[0].taints[0].effect: required" in slice_from_k8s(raw).invalid_reason
    raw = json.loads(json.dumps(COUNTERS))
    raw["spec"]["sharedCounters"][0]["counters"]["sms"] = {"value": "many"}
    assert "spec.sharedCounters[0].counters[sms].value" in slice_from_k8s(raw).invalid_reason


CLAIM = yaml.safe_load(
    """
metadata:
  name: job-0-gpu-x7k2
  namespace: ml
  uid: c1
  ownerReferences:
  - {apiVersion: v1, kind: ReplicaSet, name: rs, uid: rs1}
  - {apiVersion: v1, kind: Pod, name: job-0, uid: p1, controller: true}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        tolerations:
        - {key: example.com/unhealthy, operator: Exists, effect: NoExecute, tolerationSeconds: 60}
        - {key: example.com/zone, value: a}
        capacity: {requests: {memory: 10Gi, example.com/bandwidth: 500M}}
    - name: nic
      firstAvailable:
      - name: fast
        deviceClassName: nic.example.com
        tolerations: [{operator: Exists}]
    constraints:
    - {requests: [gpu, nic], distinctAttribute: example.com/pcieRoot}
    - {matchAttribute: example.com/numa}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.example.com, pool: node-1, device: gpu-0}
      - {request: gpu, driver: gpu.example.com, pool: node-1, device: gpu-1, adminAccess: true}
  reservedFor:
  - {resource: pods, name: job-0, uid: p1}
"""
)


def test_a_request_reads_its_tolerations_and_capacity_requests() -> None:
    gpu, nic = claim_from_k8s(CLAIM).requests
    assert gpu.exactly is not None
    assert gpu.exactly.tolerations == (
        model.DeviceToleration("example.com/unhealthy", "Exists", "", "NoExecute"),
        model.DeviceToleration("example.com/zone", "Equal", "a", ""),  # Equal by default
    )
    assert gpu.exactly.capacity_requests == {
        "memory": Fraction(10 * GI),
        "example.com/bandwidth": Fraction(500_000_000),
    }
    assert nic.first_available[0].tolerations == (model.DeviceToleration(operator="Exists"),)
    assert nic.first_available[0].capacity_requests == {}


def test_a_distinct_attribute_constraint_is_told_apart_from_a_match() -> None:
    distinct, match = claim_from_k8s(CLAIM).constraints
    assert distinct == model.MatchAttribute(
        "", ("gpu", "nic"), distinct_attribute="example.com/pcieRoot"
    )
    assert match == model.MatchAttribute("example.com/numa")


def test_a_claim_keeps_its_controller_owner() -> None:
    assert claim_from_k8s(CLAIM).owner == models.OwnerRef("Pod", "job-0", "p1", controller=True)
    raw = json.loads(json.dumps(CLAIM))
    raw["metadata"]["ownerReferences"][1]["controller"] = False
    assert claim_from_k8s(raw).owner is None


def unreadable_spec(claim: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(json.dumps(claim))
    raw["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    return raw


def test_an_unreadable_claim_keeps_its_allocation_so_its_devices_stay_in_use() -> None:
    c = claim_from_k8s(unreadable_spec(CLAIM))
    assert "count: expected an integer" in c.invalid_reason
    assert c.requests == ()
    assert c.allocation is not None
    assert [r.device for r in c.allocation.results] == ["gpu-0", "gpu-1"]
    assert c.reserved_for == (model.ConsumerRef("pods", "job-0", "p1"),)
    assert c.owner is not None and c.owner.uid == "p1"
    view = DeviceView()
    view.set(c)
    assert view.in_use() == {("gpu.example.com", "node-1", "gpu-0")}  # not the admin one


def test_each_part_of_an_unreadable_claims_status_is_kept_on_its_own() -> None:
    raw = unreadable_spec(CLAIM)
    raw["status"]["reservedFor"] = "everyone"
    raw["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    c = claim_from_k8s(raw)
    assert c.allocation is not None and c.reserved_for == () and c.deleting
    raw["status"]["allocation"]["devices"]["results"][0]["device"] = 7
    assert claim_from_k8s(raw).allocation is None
