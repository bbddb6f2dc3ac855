"""The binder's watch of its pending pods (``services.binder.pendingpods``) against the real
API server: its field selector shows exactly the pods of its profile with no node yet, a
pod leaves it when bound or deleted, and a watch resumed from its last version misses
nothing. The store then stands for the binder's read of each pod before its Binding."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from kubernetes import client

from services.binder.kubeapi import KubeClient, load_endpoint
from services.binder.pendingpods import PendingPods, PodWatch
from splitsched.testing.kube import bind_pod, create_kwok_nodes, create_pods, delete_nodes
from splitsched.testing.manifests import make_pod
from tests.support.binder import eventually
from tests.support.fixtures import ControlPlaneHandle

#: Seconds the watch has to show a change.
WITHIN = 20.0


def test_the_watch_shows_its_profiles_pending_pods_until_bound_or_deleted(
    control_plane: ControlPlaneHandle, kube_api: client.ApiClient, core_api: client.CoreV1Api,
    namespace: str,
) -> None:  # fmt: skip
    profile = f"pw-{uuid.uuid4().hex[:6]}"
    (node,) = create_kwok_nodes(kube_api, 1, name_prefix=profile, cpu="8", memory="32Gi")
    create_pods(kube_api, namespace=namespace, pods=[
        make_pod("early", scheduler_name=profile),
        make_pod("theirs", scheduler_name="default-scheduler-not-running"),
    ])  # fmt: skip

    def uid(name: str) -> str:
        return str(core_api.read_namespaced_pod(name, namespace).metadata.uid)

    async def body() -> None:
        kube = KubeClient(load_endpoint(str(control_plane.kubeconfig_path)))
        pending = PendingPods()
        watch = PodWatch(kube, pending, [profile])
        task = asyncio.create_task(watch.run())

        async def shown(name: str, uid: str = "") -> Any:
            return await eventually(lambda: pending.get(namespace, name, uid), within=WITHIN)

        async def left(name: str) -> None:
            await eventually(lambda: pending.get(namespace, name, "") is None, within=WITHIN)

        try:
            await shown("early", uid("early"))  # shown first, from resourceVersion 0
            create_pods(kube_api, namespace=namespace, pods=[
                make_pod("later", scheduler_name=profile),
                make_pod("gone", scheduler_name=profile),
            ])  # fmt: skip
            later = await shown("later", uid("later"))
            assert later["spec"]["schedulerName"] == profile
            await shown("gone")
            assert pending.get(namespace, "theirs", "") is None  # another profile's
            assert bind_pod(kube_api, namespace=namespace, pod="early", node=node) == 201
            core_api.delete_namespaced_pod("gone", namespace, grace_period_seconds=0)
            await left("early")
            await left("gone")
            assert pending.get(namespace, "later", "") is not None
            assert watch.versions[profile] not in ("", "0")  # it resumes from here
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await kube.close()

    try:
        asyncio.run(asyncio.wait_for(body(), timeout=90))
    finally:
        delete_nodes(kube_api, [node])
