"""The binder's Kubernetes API client: raw JSON over one keep-alive aiohttp connection pool.

Every request the binder makes is a value built by ``services.binder.apirequests``
(Bindings, pod reads, Events, the PodScheduled condition, a preemptor's nominatedNodeName,
Evictions of preemption victims) and sent by ``send``; ``services.binder.main`` also uses
``probe`` for readiness. The official python client is used only to *read* the
kubeconfig or in-cluster config (TLS files, bearer token, host): its
``create_namespaced_binding`` cannot decode the Status the API server returns, and its
model classes cost far more than the JSON we need.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import aiohttp
from prometheus_client import Counter

from services.binder.apirequests import ApiRequest
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
    propagate; ``services.binder.retrying`` decides what is retried.
    """

    def __init__(
        self,
        endpoint: KubeEndpoint,
        *,
        qps: float = 0.0,
        burst: int = 0,
        max_connections: int = 64,
        requests: Counter | None = None,
        on_throttled: Callable[[float], None] | None = None,
    ) -> None:
        """``requests`` counts the requests the limiter let go, by method, so a bench can
        check the rate (``splitsched_binder_api_requests_total``); a request whose budget
        ran out waiting for the limiter never left and is not counted."""

        def count(method: str) -> None:
            if requests is not None:
                requests.labels(method=method).inc()

        super().__init__(
            endpoint, max_connections=max_connections, qps=qps, burst=burst,
            on_throttled=on_throttled, on_sent=count,
        )  # fmt: skip

    async def send(
        self, request: ApiRequest, *, budget: float = DEFAULT_REQUEST_TIMEOUT
    ) -> HttpResult:
        """Send one request built by ``services.binder.apirequests``, taking at most
        ``budget`` seconds."""
        return await self.request(
            request.method, request.path, body=request.body,
            content_type=request.content_type, accept=request.accept, budget=budget,
        )  # fmt: skip

    async def probe(self, *, budget: float = 5.0) -> bool:
        """True when the API server answers ``/readyz`` (or ``/version``) with 200; the
        probe skips the limiter (`health_request`)."""
        for path in ("/readyz", "/version"):
            try:
                result = await self.health_request(path, budget=budget)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                log.debug("API server probe %s failed: %s", path, exc)
                return False
            if result.status == 200:
                return True
        return False
