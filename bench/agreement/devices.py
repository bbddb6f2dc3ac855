"""Devices for a scenario (feature ``devices``: Dynamic Resource Allocation). Pure.

* DeviceClasses: ``@dc-gpu`` (every device of the GPU driver), ``@dc-big`` (a CEL
  selector on the driver and the ``memory`` attribute) and ``@dc-net`` (the NIC driver);
  ``@dc-missing`` is never created;
* ResourceSlices: on some nodes a pool (named after the node) of 0-8 GPUs with attributes
  ``model``, ``memory`` (GiB) and ``pcieRoot`` (two roots per node); sometimes one
  network-attached pool (``allNodes``) of a few NICs;
* ResourceClaims, made by the run before any pod (not from templates: the claims, and so
  the runs, stay deterministic): some pods get a claim of their own with one or two
  requests of 1-4 devices, selectors that sometimes match nothing, sometimes a
  ``matchAttribute`` constraint on ``pcieRoot``, sometimes a class that does not exist;
  one claim may be shared by two pods.

Names: cluster-scoped objects are ``@dc-gpu``, ``@rs-n03``...; a node's pool and its
``nodeName`` are ``@n03``, which each run renders as its own node; claims are ``rc03`` in
the namespace slot ``@ns0``, where their pods move.
"""

from __future__ import annotations

import random
from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any

Manifest = dict[str, Any]

GPU_DRIVER = "gpu.example.com"
NET_DRIVER = "net.example.com"
GPU_CLASS = "@dc-gpu"
BIG_CLASS = "@dc-big"  # GPUs with at least 40 GiB
NET_CLASS = "@dc-net"
MISSING_CLASS = "@dc-missing"  # never created
SHARED_CLAIM = "rc-shared"
MODELS = (("t4", 16), ("a100", 40), ("a100", 80), ("h100", 80))
PCIE_ROOT = f"{GPU_DRIVER}/pcieRoot"


@dataclass(frozen=True)
class Devices:
    #: DeviceClasses and ResourceSlices, in creation order (cluster-scoped).
    objects: tuple[Manifest, ...] = ()
    #: ResourceClaims (namespace slot in metadata.namespace), unallocated.
    claims: tuple[Manifest, ...] = ()


def generate(rng: random.Random, nodes: Sequence[Manifest], features: Set[str]) -> Devices:
    """The classes and slices; claims come with the pods (``attach``)."""
    if "devices" not in features:
        return Devices()
    objects = [
        _class(GPU_CLASS, f'device.driver == "{GPU_DRIVER}"'),
        _class(
            BIG_CLASS,
            f'device.driver == "{GPU_DRIVER}" && device.attributes["{GPU_DRIVER}"].memory >= 40',
        ),
        _class(NET_CLASS, f'device.driver == "{NET_DRIVER}"'),
    ]
    for node in nodes:
        if rng.random() < 0.6:
            objects.append(_gpu_slice(rng, node["metadata"]["name"]))
    if rng.random() < 0.5:
        objects.append(_net_slice(rng.randint(1, 3)))
    return Devices(objects=tuple(objects))


def _class(name: str, expression: str) -> Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _slice(name: str, driver: str, pool: str, devices: list[Manifest]) -> Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _gpu_slice(rng: random.Random, node: str) -> Manifest:
    """A node's pool of 0-8 GPUs of one model, split over two PCIe roots."""
    model, memory = rng.choice(MODELS)
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": model},
                "memory": {"int": memory},
                "pcieRoot": {"string": f"pci{i % 2}" if rng.random() < 0.8 else "pci0"},
            },
        }
        for i in range(rng.randint(0, 8))
    ]
    out = _slice(f"@rs-{node}", GPU_DRIVER, f"@{node}", devices)
    out["spec"]["nodeName"] = f"@{node}"
    return out


def _net_slice(count: int) -> Manifest:
    devices = [{"name": f"nic-{i}", "attributes": {"speed": {"int": 100}}} for i in range(count)]
    out = _slice("@rs-net", NET_DRIVER, "@net", devices)
    out["spec"]["allNodes"] = True
    return out


def attach(rng: random.Random, pods: Sequence[Manifest], devices: Devices) -> Devices:
    """Give some pods a claim (their own, or the shared one for two pods); the pods move to
    the claims' namespace slot (@ns0). Returns ``devices`` with the claims."""
    if not devices.objects:
        return devices
    net = any(o["metadata"]["name"] == "@rs-net" for o in devices.objects)
    claims: list[Manifest] = []
    sharers = rng.sample(range(len(pods)), k=2) if rng.random() < 0.5 and len(pods) > 1 else []
    for index, pod in enumerate(pods):
        if index in sharers:
            if index == sharers[0]:
                claims.append(_claim(SHARED_CLAIM, _requests(rng, net), []))
            _use(pod, SHARED_CLAIM)
        elif rng.random() < 0.3:
            name = f"rc{index:02d}"
            requests = _requests(rng, net)
            claims.append(_claim(name, requests, _constraints(rng, requests)))
            _use(pod, name)
    return Devices(objects=devices.objects, claims=tuple(claims))


def _use(pod: Manifest, claim: str) -> None:
    pod["metadata"]["namespace"] = "@ns0"
    pod["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": claim}]
    pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "dev"}]


def _claim(name: str, requests: list[Manifest], constraints: list[Manifest]) -> Manifest:
    devices: Manifest = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "@ns0"},
        "spec": {"devices": devices},
    }


def _requests(rng: random.Random, net: bool) -> list[Manifest]:
    """One request, sometimes two (the second may ask for a NIC)."""
    out = [_request(rng, "gpu", _gpu_class(rng))]
    if rng.random() < 0.25:
        second = NET_CLASS if net and rng.random() < 0.5 else _gpu_class(rng)
        out.append(_request(rng, "extra", second))
    return out


def _gpu_class(rng: random.Random) -> str:
    roll = rng.random()
    return MISSING_CLASS if roll < 0.05 else BIG_CLASS if roll < 0.3 else GPU_CLASS


def _request(rng: random.Random, name: str, device_class: str) -> Manifest:
    exactly: Manifest = {
        "deviceClassName": device_class,
        "allocationMode": "ExactCount",
        "count": rng.choice((1, 1, 1, 2, 2, 3, 4)),
    }
    if device_class != NET_CLASS and rng.random() < 0.3:
        model = rng.choice(("t4", "a100", "h100", "b200"))  # b200: no device has it
        expression = f'device.attributes["{GPU_DRIVER}"].model == "{model}"'
        exactly["selectors"] = [{"cel": {"expression": expression}}]
    return {"name": name, "exactly": exactly}


def _constraints(rng: random.Random, requests: list[Manifest]) -> list[Manifest]:
    """Sometimes: every GPU of the claim on one PCIe root."""
    gpu = [r["name"] for r in requests if r["exactly"]["deviceClassName"] != NET_CLASS]
    if len(gpu) < len(requests) or rng.random() >= 0.3:
        return []
    return [{"requests": gpu, "matchAttribute": PCIE_ROOT}]
