"""gRPC servers and channels with the settings every service shares: message-size limits,
keepalive, the standard health service and server reflection (so Kubernetes' native gRPC
probes and grpcurl work), and client-side round-robin over a DNS name for binders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024

AddServicer = Callable[[Any, grpc.aio.Server], None]


def _options(max_message_bytes: int) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ]


@dataclass
class GrpcServer:
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    service_names: Sequence[str]

    async def set_serving(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *self.service_names):
            await self.health.set(name, status)

    async def stop(self, grace: float) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)


async def serve(
    *,
    listen: str,
    servicers: Sequence[tuple[AddServicer, Any]],
    service_names: Sequence[str],
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    max_connection_age_s: float | None = None,
) -> GrpcServer:
    """Start a gRPC aio server on `listen` ("host:port", port 0 = any); health starts
    NOT_SERVING until the service calls `set_serving(True)`. `max_connection_age_s` makes
    clients reconnect (and so re-resolve a DNS name) periodically: binders use it so a
    scheduler's round robin over a headless Service finds replicas added later."""
    options = _options(max_message_bytes)
    if max_connection_age_s:
        options += [
            ("grpc.max_connection_age_ms", int(max_connection_age_s * 1000)),
            ("grpc.max_connection_age_grace_ms", 10_000),
        ]
    server = grpc.aio.server(options=options, interceptors=interceptors)
    for add, servicer in servicers:
        add(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*service_names, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    await server.start()
    srv = GrpcServer(server, health_servicer, port, tuple(service_names))
    await srv.set_serving(False)
    return srv


def channel(
    target: str,
    *,
    round_robin: bool = False,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> grpc.aio.Channel:
    """A client channel. With `round_robin`, `target` may be `dns:///binders:50052` (a
    headless Service) or a comma-separated static list `ipv4:a:p,b:p` form accepted by
    gRPC; every resolved address gets calls in turn."""
    options = _options(max_message_bytes)
    # gRPC's default reconnect backoff grows to 2 minutes; our peers restart in seconds.
    options += [
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ]
    if round_robin:
        options.append(("grpc.lb_policy_name", "round_robin"))
    return grpc.aio.insecure_channel(target, options=options)


def host_port(listen: str, port: int) -> str:
    host = listen.rsplit(":", 1)[0] or "0.0.0.0"
    return f"{host}:{port}"
