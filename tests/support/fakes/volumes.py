"""`VolumeKube`: `FakeKube` plus what the binder's volume step touches, PersistentVolumes and
PersistentVolumeClaims (GET, and the merge PATCH with a ``metadata.resourceVersion``
precondition the real API server checks: 409 when the object changed), and a stand-in for
kube-controller-manager's PV controller: once a PV's claimRef names a claim, it binds the
claim (``spec.volumeName``, ``pv.kubernetes.io/bind-completed``, phase Bound) after
``controller_delay``; a claim annotated ``volume.kubernetes.io/selected-node`` is
provisioned (a new PV ``pvc-<claim uid>`` bound to it) unless ``provisioning_fails``, when
the annotation is removed as a failing provisioner does. ``controller`` off: nothing binds.

Tests read ``volume_writes`` (every PATCH in arrival order) and the objects themselves.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.fakes.kube import FakeKube, Scripted

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def claim_object(namespace: str, name: str, *, uid: str = "", **spec: Any) -> dict[str, Any]:
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"},
        "spec": {"accessModes": ["ReadWriteOnce"], **spec},
        "status": {"phase": "Pending"},
    }


def pv_object(name: str, *, claim_ref: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "storageClassName": "local"}
    if claim_ref is not None:
        spec["claimRef"] = claim_ref
    return {"kind": "PersistentVolume", "apiVersion": "v1", "metadata": {"name": name},
            "spec": spec, "status": {"phase": "Available"}}  # fmt: skip


@dataclass
class VolumeKube(FakeKube):
    """``FakeKube`` plus PVs, claims and a PV controller (see the module docstring)."""

    pvs: dict[str, dict[str, Any]] = field(default_factory=dict)
    claims: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    controller: bool = True
    controller_delay: float = 0.02
    provisioning_fails: bool = False
    #: Scripted answers of the PATCHes, by path; a step whose ``message`` is "apply" lands
    #: the write before answering its status (a write that landed unheard).
    volume_script: dict[str, list[Scripted]] = field(default_factory=dict)
    #: Every PATCH of a PV or claim: (kind, name, body), in arrival order.
    volume_writes: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    #: What happened, in order: "patch PersistentVolume pv-a", "bound ns/claim to pv-a",
    #: "binding ns/pod".
    timeline: list[str] = field(default_factory=list)
    _version: int = 100
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def app(self) -> web.Application:
        app = super().app()
        pv_path = "/api/v1/persistentvolumes/{name}"
        claim_path = "/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}"
        app.router.add_get(pv_path, self._get_pv)
        app.router.add_patch(pv_path, self._patch_pv)
        app.router.add_get(claim_path, self._get_claim)
        app.router.add_patch(claim_path, self._patch_claim)
        return app

    async def _bind(self, request: web.Request) -> web.StreamResponse:
        self.timeline.append(f"binding {request.match_info['ns']}/{request.match_info['name']}")
        return await super()._bind(request)

    # ---- the objects ----------------------------------------------------------------------

    def put_claim(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.claims[(meta["namespace"], meta["name"])] = obj
        self._bump(obj)

    def put_pv(self, obj: dict[str, Any]) -> None:
        self.pvs[obj["metadata"]["name"]] = obj
        self._bump(obj)

    def claim(self, namespace: str, name: str) -> dict[str, Any]:
        return self.claims[(namespace, name)]

    def _bump(self, obj: dict[str, Any]) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)

    # ---- the endpoints -------------------------------------------------------------------

    async def _get_pv(self, request: web.Request) -> web.Response:
        self.reads.append(request.path)
        found = self.pvs.get(request.match_info["name"])
        if found is None:
            return self._status(404, f'persistentvolumes "{request.match_info["name"]}" not found')
        return web.json_response(found)

    async def _get_claim(self, request: web.Request) -> web.Response:
        self.reads.append(request.path)
        ns, name = request.match_info["ns"], request.match_info["name"]
        found = self.claims.get((ns, name))
        if found is None:
            return self._status(404, f'persistentvolumeclaims "{name}" not found')
        return web.json_response(found)

    async def _patch_pv(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        return await self._patch(request, "PersistentVolume", name, self.pvs.get(name))

    async def _patch_claim(self, request: web.Request) -> web.StreamResponse:
        ns, name = request.match_info["ns"], request.match_info["name"]
        return await self._patch(
            request, "PersistentVolumeClaim", name, self.claims.get((ns, name))
        )

    async def _patch(
        self, request: web.Request, kind: str, name: str, obj: dict[str, Any] | None
    ) -> web.StreamResponse:
        body = await request.json()
        assert request.content_type == "application/merge-patch+json"
        self.volume_writes.append((kind, name, body))
        self.timeline.append(f"patch {kind} {name}")
        queue = self.volume_script.get(request.path)
        step = queue.pop(0) if queue else None
        if step is not None and step.reset:
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        if step is not None and step.message != "apply":
            return self._status(step.status, f"scripted {step.status}")
        if obj is None:
            return self._status(404, f'{kind.lower()}s "{name}" not found')
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != obj["metadata"]["resourceVersion"]:
            return self._status(
                409, f'Operation cannot be fulfilled on {kind.lower()}s "{name}": the object '
                "has been modified; please apply your changes to the latest version and try "
                "again",
            )  # fmt: skip
        patched = merge_patch(obj, body)
        obj.clear()
        obj.update(patched)
        self._bump(obj)
        self._react(kind, obj)
        if step is not None:  # "apply": landed, but the answer says otherwise
            return self._status(step.status, f"scripted {step.status}")
        return web.json_response(obj)

    # ---- the PV controller ---------------------------------------------------------------

    def _react(self, kind: str, obj: dict[str, Any]) -> None:
        if not self.controller:
            return
        if kind == "PersistentVolume" and (obj["spec"].get("claimRef") or {}).get("uid"):
            self.later(self.bind_claim_to(obj["metadata"]["name"]))
        elif kind == "PersistentVolumeClaim" and SELECTED_NODE in obj["metadata"].get(
            "annotations", {}
        ):
            self.later(self._provision(obj))

    def later(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def bind_claim_to(self, pv_name: str) -> None:
        await asyncio.sleep(self.controller_delay)
        pv = self.pvs[pv_name]
        ref = pv["spec"]["claimRef"]
        claim = self.claims.get((ref["namespace"], ref["name"]))
        if claim is None or claim["metadata"]["uid"] != ref["uid"]:
            return
        self._bind_claim(claim, pv)

    def _bind_claim(self, claim: dict[str, Any], pv: dict[str, Any]) -> None:
        claim["spec"]["volumeName"] = pv["metadata"]["name"]
        annotations = claim["metadata"].setdefault("annotations", {})
        annotations[BIND_COMPLETED] = "yes"
        annotations[BOUND_BY_CONTROLLER] = "yes"
        claim["status"]["phase"] = "Bound"
        pv["status"]["phase"] = "Bound"
        meta = claim["metadata"]
        self.timeline.append(
            f"bound {meta['namespace']}/{meta['name']} to {pv['metadata']['name']}"
        )
        self._bump(claim)
        self._bump(pv)

    async def _provision(self, claim: dict[str, Any]) -> None:
        await asyncio.sleep(self.controller_delay)
        if self.provisioning_fails:
            del claim["metadata"]["annotations"][SELECTED_NODE]
            self._bump(claim)
            return
        meta = claim["metadata"]
        ref = {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
               "name": meta["name"], "uid": meta["uid"]}  # fmt: skip
        pv = pv_object(f"pvc-{meta['uid']}", claim_ref=ref)
        self.put_pv(pv)
        self._bind_claim(claim, pv)
