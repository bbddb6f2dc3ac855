"""A test "driver" for Dynamic Resource Allocation on kwok nodes: what a GPU vendor's DRA
driver publishes, without a kubelet plugin. Each node gets one ResourceSlice (its own
pool) of GPUs spread over PCIe roots, with a model attribute and memory capacity, and a
DeviceClass selects the driver's devices. Nothing here prepares a device on a node: kwok
runs no containers, and scheduling reads only what the driver publishes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

PCIE_ROOT = "pcieRoot"


@dataclass
class GpuDriver:
    """One driver (`<name>.example.com`) and its DeviceClass `<name>`."""

    api: client.ApiClient
    name: str = field(default_factory=lambda: f"gpu-{uuid.uuid4().hex[:6]}")
    published: list[str] = field(default_factory=list)

    @property
    def driver(self) -> str:
        return f"{self.name}.example.com"

    @property
    def resource(self) -> client.ResourceV1Api:
        return client.ResourceV1Api(self.api)

    def create_class(self) -> None:
        selector = {"cel": {"expression": f'device.driver == "{self.driver}"'}}
        self.resource.create_device_class(
            {"metadata": {"name": self.name}, "spec": {"selectors": [selector]}}
        )

    def publish(
        self, nodes: Iterable[str], *, gpus: int = 8, roots: int = 2, model: str = "H100"
    ) -> None:
        """A slice per node: `gpus` GPUs, the first half on PCIe root 0, the rest on 1
        (for 2 roots), each with 80Gi of memory."""
        for node in nodes:
            name = f"{self.name}-{node}"
            self.resource.create_resource_slice(
                {"metadata": {"name": name}, "spec": self._spec(node, gpus, roots, model)}
            )
            self.published.append(name)

    def _spec(self, node: str, gpus: int, roots: int, model: str) -> dict[str, Any]:
        per_root = max(1, gpus // roots)
        devices = [
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "model": {"string": model},
                    PCIE_ROOT: {"string": f"root-{i // per_root}"},
                },
                "capacity": {"memory": {"value": "80Gi"}},
            }
            for i in range(gpus)
        ]
        pool = {"name": node, "generation": 1, "resourceSliceCount": 1}
        return {"driver": self.driver, "nodeName": node, "pool": pool, "devices": devices}

    def withdraw(self) -> None:
        """Delete every slice published and the class (missing ones are fine)."""
        for name in self.published:
            _ignore_missing(self.resource.delete_resource_slice, name)
        self.published.clear()
        _ignore_missing(self.resource.delete_device_class, self.name)


@contextmanager
def gpu_driver(api: client.ApiClient) -> Iterator[GpuDriver]:
    driver = GpuDriver(api)
    driver.create_class()
    try:
        yield driver
    finally:
        driver.withdraw()


def claim_template(
    api: client.ApiClient, namespace: str, name: str, device_class: str, *, count: int,
    selectors: Iterable[str] = (), same: str = "",
) -> None:  # fmt: skip
    """A ResourceClaimTemplate asking for `count` devices of the class; with `same` (a
    fully qualified attribute), all of them with one value of it (matchAttribute)."""
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly}]}
    if same:
        devices["constraints"] = [{"matchAttribute": same}]
    body = {"metadata": {"name": name}, "spec": {"spec": {"devices": devices}}}
    client.ResourceV1Api(api).create_namespaced_resource_claim_template(namespace, body)


def _ignore_missing(delete: Any, name: str) -> None:
    try:
        delete(name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
