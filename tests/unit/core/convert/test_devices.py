"""DRA objects from their API JSON (resource.k8s.io/v1): what the allocator reads, names
fully qualified, and bad input kept with a reason instead of dropped."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import yaml

from splitsched.core import models
from splitsched.core.convert import ConversionError
from splitsched.core.convert.devices import claim_from_k8s, class_from_k8s, slice_from_k8s
from splitsched.core.devices import model, semver
from tests.support.devices import NODE_1, allocate, claim

SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpu.example.com-x7k2", "resourceVersion": "42"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 3, "resourceSliceCount": 1},
        "nodeName": "node-1",
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {
                    "model": {"string": "A100"},
                    "index": {"int": 0},
                    "healthy": {"bool": True},
                    "driverVersion": {"version": "1.2.3"},
                    "topology.example.com/pcieRoot": {"string": "pci0"},
                },
                "capacity": {"memory": {"value": "80Gi"}},
            },
            {"name": "gpu-1"},
        ],
    },
}


def test_a_slice_reads_with_its_names_fully_qualified() -> None:
    s = slice_from_k8s(SLICE)
    assert (s.name, s.driver, s.pool, s.generation, s.slice_count) == (
        "node-1-gpu.example.com-x7k2", "gpu.example.com", "node-1", 3, 1,
    )  # fmt: skip
    assert (s.node_name, s.all_nodes, s.node_selector, s.invalid_reason) == (
        "node-1",
        False,
        None,
        "",
    )
    gpu = s.devices[0]
    assert gpu.attributes == {
        "gpu.example.com/model": "A100",
        "gpu.example.com/index": 0,
        "gpu.example.com/healthy": True,
        "gpu.example.com/driverVersion": semver.parse("1.2.3"),
        "topology.example.com/pcieRoot": "pci0",
    }
    assert gpu.capacity == {"gpu.example.com/memory": Fraction(80 * 2**30)}
    assert s.devices[1] == model.Device("gpu-1")


def test_a_network_slice_reads_its_node_selector() -> None:
    raw = json.loads(json.dumps(SLICE))
    del raw["spec"]["nodeName"]
    raw["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
        ]
    }
    s = slice_from_k8s(raw)
    assert s.node_selector == (
        models.NodeSelectorTerm((models.NodeSelectorRequirement("rack", "In", ("r1",)),)),
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            lambda d: d["attributes"].update(bad={"int": 1, "string": "x"}),
            "spec.devices[0].attributes[bad]: expected exactly one",
        ),
        (
            lambda d: d["attributes"].update(v={"version": "v1"}),
            "spec.devices[0].attributes[v].version: invalid semantic version",
        ),
        (
            lambda d: d["capacity"].update(memory={"value": "12XB"}),
            "spec.devices[0].capacity[memory].value",
        ),
        (lambda d: d.update(name="gpu-1"), "spec.devices: duplicate device name gpu-1"),
    ],
)
def test_a_slice_that_cannot_be_read_keeps_its_place_and_says_why(
    change: object, reason: str
) -> None:
    raw = json.loads(json.dumps(SLICE))
    change(raw["spec"]["devices"][0])  # type: ignore[operator]
    s = slice_from_k8s(raw)
    assert reason in s.invalid_reason
    assert (s.driver, s.pool, s.node_name, s.devices) == ("gpu.example.com", "node-1", "node-1", ())


def test_an_unreadable_slice_makes_its_pool_invalid_not_incomplete() -> None:
    raw = json.loads(json.dumps(SLICE))
    raw["spec"]["devices"][0]["capacity"]["memory"] = {"value": "lots"}
    classes = {"gpu": model.DeviceClass("gpu", ('device.driver == "gpu.example.com"',))}
    with pytest.raises(Exception, match="invalid resource pools were encountered"):
        allocate(
            [claim("c", model.DeviceRequest("r", model.RequestSpec("r", "gpu")))],
            slice_from_k8s(raw),
            node=NODE_1,
            classes=classes,
        )


def test_a_device_class_reads_its_selectors_and_config() -> None:
    raw = {
        "metadata": {"name": "gpu.example.com", "resourceVersion": "7"},
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
            "config": [
                {"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "none"}}}
            ],
        },
    }
    c = class_from_k8s(raw)
    assert c.selectors == ('device.driver == "gpu.example.com"',)
    assert json.loads(c.config[0]) == {
        "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "none"}}
    }
    with pytest.raises(ConversionError, match=r"deviceclass bad: spec.selectors\[0\]"):
        class_from_k8s(
            {"metadata": {"name": "bad"}, "spec": {"selectors": [{"cel": {"expression": 3}}]}}
        )


CLAIM = yaml.safe_load(
    """
metadata: {name: job-0-gpus-abcde, namespace: ml, uid: u1, resourceVersion: "9"}
spec:
  devices:
    requests:
    - name: gpus
      exactly:
        deviceClassName: gpu.example.com
        count: 2
        selectors: [{cel: {expression: "true"}}]
    - name: nic
      firstAvailable:
      - {name: fast, deviceClassName: nic.example.com}
      - {name: any, deviceClassName: nic.example.com, allocationMode: All}
    constraints:
    - {requests: [gpus], matchAttribute: topology.example.com/pcieRoot}
    config:
    - requests: [gpus]
      opaque: {driver: gpu.example.com, parameters: {}}
status:
  allocation:
    devices:
      results:
      - {request: gpus, driver: gpu.example.com, pool: node-1, device: gpu-0}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
  reservedFor:
  - {resource: pods, name: job-0, uid: p1}
"""
)


def test_a_claim_reads_its_requests_constraints_and_status() -> None:
    c = claim_from_k8s(CLAIM)
    assert (c.namespace, c.name, c.uid, c.resource_version, c.invalid_reason) == (
        "ml",
        "job-0-gpus-abcde",
        "u1",
        "9",
        "",
    )
    gpus, nic = c.requests
    assert gpus.exactly == model.RequestSpec("gpus", "gpu.example.com", ("true",), "ExactCount", 2)
    assert [s.name for s in nic.first_available] == ["nic/fast", "nic/any"]
    assert [(s.mode, s.count) for s in nic.first_available] == [("ExactCount", 1), ("All", 0)]
    assert c.constraints == (model.MatchAttribute("topology.example.com/pcieRoot", ("gpus",)),)
    assert c.config[0].requests == ("gpus",) and "opaque" in json.loads(c.config[0].configuration)
    assert c.allocation is not None
    assert c.allocation.results == (
        model.DeviceResult("gpus", "gpu.example.com", "node-1", "gpu-0"),
    )
    assert c.reserved_for == (model.ConsumerRef("pods", "job-0", "p1"),)


def test_a_claim_that_cannot_be_read_keeps_its_identity_and_says_why() -> None:
    raw = json.loads(json.dumps(CLAIM))
    raw["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    c = claim_from_k8s(raw)
    assert (c.namespace, c.name, c.uid) == ("ml", "job-0-gpus-abcde", "u1")
    assert (
        c.invalid_reason
        == "spec.devices.requests[0].exactly.count: expected an integer, got string 'two'"
    )
