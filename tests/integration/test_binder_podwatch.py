"""The binder's watch of its pending pods (``services.binder.pendingpods``) against the real
API server: its field selector shows exactly the pods of its profile with no node yet, a
pod leaves it when bound or deleted, and a watch resumed from its last version misses
nothing. The store then stands for the binder's read of each pod before its Binding."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from kubernetes import client

from services.binder.kubeapi import KubeClient, load_endpoint
from services.binder.pendingpods import PendingPods, PodWatch
from splitsched.testing.kube import bind_pod, create_kwok_nodes, create_pods, delete_nodes
from splitsched.testing.manifests import make_pod
from tests.support.fixtures import ControlPlaneHandle

T = TypeVar("T")


async def until(predicate: Callable[[], T], *, within: float = 20.0) -> T:
    end = time.monotonic() + within
    while not (value := predicate()):
        assert time.monotonic() < end, "not shown in time"
        await asyncio.sleep(0.05)
    return value


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
        try:
            await until(lambda: pending.get(namespace, "early", uid("early")))  # listed first
            create_pods(kube_api, namespace=namespace, pods=[
                make_pod("later", scheduler_name=profile),
                make_pod("gone", scheduler_name=profile),
            ])  # fmt: skip
            shown = await until(lambda: pending.get(namespace, "later", uid("later")))
            assert shown is not None and shown["spec"]["schedulerName"] == profile
            await until(lambda: pending.get(namespace, "gone", ""))
            assert pending.get(namespace, "theirs", "") is None  # another profile's
            assert bind_pod(kube_api, namespace=namespace, pod="early", node=node) == 201
            core_api.delete_namespaced_pod("gone", namespace, grace_period_seconds=0)
            await until(lambda: pending.get(namespace, "early", "") is None)
            await until(lambda: pending.get(namespace, "gone", "") is None)
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
