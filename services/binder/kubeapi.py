"""The binder's Kubernetes API client: raw JSON over one keep-alive aiohttp connection pool.

Called by ``services.binder.worker`` (Binding POSTs, pod GETs after a 409, Events, the
PodScheduled condition, a preemptor's nominatedNodeName, Evictions of preemption victims)
and ``services.binder.main`` (readiness probe). The official
python client is used only to *read* the kubeconfig or in-cluster config (TLS files,
bearer token, host): its ``create_namespaced_binding`` cannot decode the Status the
API server returns, and its model classes cost far more than the JSON we need.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import aiohttp

from splitsched.runtime import kubeclient

# Where the API server is, how to authenticate and how a request is made: shared with the
# scheduler's Lease client.
from splitsched.runtime.kubeclient import KubeEndpoint as KubeEndpoint
from splitsched.runtime.kubeclient import load_endpoint as load_endpoint
from splitsched.runtime.kubeclient import parse_retry_after as parse_retry_after

log = logging.getLogger(__name__)

#: Per-request timeout when the caller gives none (seconds).
DEFAULT_REQUEST_TIMEOUT = 10.0

#: One API response (status, decoded body, Retry-After): the runtime client's.
HttpResult = kubeclient.Response


class KubeClient(kubeclient.KubeClient):
    """The few API calls the binder makes, on one shared aiohttp session.

    Network errors (``aiohttp.ClientError``, ``asyncio.TimeoutError``, ``OSError``)
    propagate; the worker decides what is retryable.
    """

    def __init__(
        self,
        endpoint: KubeEndpoint,
        *,
        qps: float = 0.0,
        burst: int = 0,
        max_connections: int = 64,
    ) -> None:
        super().__init__(endpoint, max_connections=max_connections, qps=qps, burst=burst)

    # -- the calls the binder makes --------------------------------------------------------

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, budget: float
    ) -> HttpResult:
        """POST pods/{name}/binding with the pod's uid as a precondition."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding"
        return await self.request("POST", path, body=body, budget=budget)

    async def get_pod(self, *, namespace: str, name: str, budget: float) -> HttpResult:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        return await self.request("GET", path, budget=budget)

    async def create_event(self, *, namespace: str, event: dict[str, Any]) -> HttpResult:
        """Create an ``events.k8s.io/v1`` Event."""
        path = f"/apis/events.k8s.io/v1/namespaces/{quote(namespace)}/events"
        return await self.request("POST", path, body=event)

    async def patch_pod_status(
        self,
        *,
        namespace: str,
        name: str,
        patch: dict[str, Any],
        content_type: str = "application/strategic-merge-patch+json",
        budget: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> HttpResult:
        """PATCH of pods/{name}/status (strategic merge unless ``content_type`` says other)."""
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status"
        return await self.request(
            "PATCH", path, body=patch, content_type=content_type, budget=budget
        )

    async def evict_pod(self, *, namespace: str, name: str, uid: str, budget: float) -> HttpResult:
        """POST a policy/v1 Eviction for pods/{name}, the pod's uid as a precondition.

        The API server checks PodDisruptionBudgets: 429 when one forbids the eviction.
        """
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/eviction"
        return await self.request("POST", path, body=body, budget=budget)

    async def probe(self, *, budget: float = 5.0) -> bool:
        """True when the API server answers ``/readyz`` (or ``/version``) with 200."""
        for path in ("/readyz", "/version"):
            try:
                result = await self.request("GET", path, budget=budget)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                log.debug("API server probe %s failed: %s", path, exc)
                return False
            if result.status == 200:
                return True
        return False
