"""`DeviceKube`: `FakeKube` plus what the binder's device step touches, ResourceClaims
(resource.k8s.io/v1): GET; PUT of the claim (its metadata and spec, the status kept) and of
its status (the status only), each refused with 409 when the body's resourceVersion or uid
is not the claim's, as the real API server does; and the strategic-merge PATCH of the
status kube-scheduler's Unreserve sends (``$patch: delete`` of a reservedFor entry by uid,
409 for another ``metadata.uid``).

Tests read ``claim_writes`` (every write in arrival order, "update ns/c", "status ns/c",
"unreserve ns/c") and ``timeline`` (the same with "binding ns/pod"), script answers by
path in ``claim_script`` (a step's status is answered instead, nothing lands), and may
react to a landed write with ``after_write``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.fakes.kube import FakeKube, Scripted

CLAIM_PATH = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}"


def resource_claim(
    name: str, *, namespace: str = "ns", uid: str = "", status: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ResourceClaim asking for one device of class ``gpu``."""
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"},
        "spec": {"devices": {"requests": [request]}},
        "status": dict(status or {}),
    }


@dataclass
class DeviceKube(FakeKube):
    """``FakeKube`` plus ResourceClaims (see the module docstring)."""

    resource_claims: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    claim_script: dict[str, list[Scripted]] = field(default_factory=dict)
    claim_writes: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    #: Called with the write's name ("status ns/c") after it landed.
    after_write: Callable[[str], None] | None = None
    _version: int = 100

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get(CLAIM_PATH, self._get_claim)
        app.router.add_put(CLAIM_PATH, self._put_claim)
        app.router.add_put(CLAIM_PATH + "/status", self._put_status)
        app.router.add_patch(CLAIM_PATH + "/status", self._patch_status_of_claim)
        return app

    def put_resource_claim(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.resource_claims[(meta["namespace"], meta["name"])] = obj
        self._bump(obj)

    def resource_claim(self, namespace: str, name: str) -> dict[str, Any]:
        return self.resource_claims[(namespace, name)]

    def _bump(self, obj: dict[str, Any]) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)

    async def _bind(self, request: web.Request) -> web.StreamResponse:
        self.timeline.append(f"binding {request.match_info['ns']}/{request.match_info['name']}")
        return await super()._bind(request)

    async def _get_claim(self, request: web.Request) -> web.Response:
        self.reads.append(request.path)
        found = self.resource_claims.get((request.match_info["ns"], request.match_info["name"]))
        if found is None:
            return self._status(404, f'resourceclaims "{request.match_info["name"]}" not found')
        return web.json_response(found)

    async def _put_claim(self, request: web.Request) -> web.Response:
        def apply(claim: dict[str, Any], body: dict[str, Any]) -> None:
            claim["metadata"]["finalizers"] = body["metadata"].get("finalizers") or []
            claim["spec"] = body["spec"]

        return await self._write(request, "update", apply)

    async def _put_status(self, request: web.Request) -> web.Response:
        def apply(claim: dict[str, Any], body: dict[str, Any]) -> None:
            claim["status"] = body.get("status") or {}

        return await self._write(request, "status", apply)

    async def _patch_status_of_claim(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/strategic-merge-patch+json"

        def apply(claim: dict[str, Any], body: dict[str, Any]) -> None:
            gone = {e["uid"] for e in body["status"]["reservedFor"] if e.get("$patch") == "delete"}
            reserved = claim["status"].get("reservedFor") or []
            claim["status"]["reservedFor"] = [r for r in reserved if r["uid"] not in gone]

        return await self._write(request, "unreserve", apply)

    async def _write(
        self,
        request: web.Request,
        kind: str,
        apply: Callable[[dict[str, Any], dict[str, Any]], None],
    ) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        what = f"{kind} {ns}/{name}"
        body = await request.json()
        self.claim_writes.append(what)
        self.timeline.append(what)
        queue = self.claim_script.get(request.path)
        if queue:
            step = queue.pop(0)
            return self._status(step.status, step.message or f"scripted {step.status}")
        claim = self.resource_claims.get((ns, name))
        if claim is None:
            return self._status(404, f'resourceclaims "{name}" not found')
        meta, ours = body.get("metadata") or {}, claim["metadata"]
        if meta.get("uid") not in (None, ours["uid"]) or meta.get("resourceVersion") not in (
            None, ours["resourceVersion"],
        ):  # fmt: skip
            return self._status(
                409, f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{name}": '
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
            )  # fmt: skip
        apply(claim, copy.deepcopy(body))
        self._bump(claim)
        if self.after_write is not None:
            self.after_write(what)
        return web.json_response(claim)
