"""gRPC servers and channels with the settings every service shares: message-size limits,
keepalive, the standard health service and server reflection (so Kubernetes' native gRPC
probes and grpcurl work), client-side round-robin over a DNS name for binders, and optional
TLS on both ends (`ServerTls` for `serve`, `ClientTls` for `channel`; mutual when the
server is given a CA and `require_client_cert`). Servers take new certificate, key and
CA files at the next handshake (gRPC's dynamic credentials over `tlsfiles`); a channel
keeps its credentials, so long-lived ones are `tlsreload.ReloadingChannel`s. Both are
built from flags by `splitsched.runtime.security`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from splitsched.runtime import grpcguard, reflection, tlsfiles

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024

AddServicer = Callable[[Any, grpc.aio.Server], None]


#: Re-exported: what `ServerTls`/`ClientTls` raise for unusable files (names the flag).
TlsError = tlsfiles.TlsError

CertificateFetcher = Callable[[], grpc.ServerCertificateConfiguration | None]


@dataclass(frozen=True)
class ServerTls:
    """A server's certificate and key; with `ca` and `require_client_cert`, clients must
    present a certificate that `ca` signed (mutual TLS). `flag_prefix` names the flags in
    errors ("--tls-" → "--tls-cert")."""

    cert: str
    key: str
    ca: str | None = None
    require_client_cert: bool = False
    flag_prefix: str = "--tls-"

    def files(self) -> tlsfiles.WatchedTls:
        """The watched files (read and checked the first time; TlsError names the flag)."""
        f = self.flag_prefix
        if self.require_client_cert and not self.ca:
            raise TlsError(f"{f}client-auth needs {f}ca (the CA that signs client certificates)")
        return tlsfiles.watch(tlsfiles.Paths("server", self.cert, self.key, self.ca, f))

    def credentials(self) -> grpc.ServerCredentials:
        """Checks the files now (TlsError names the flag); from then on every new
        handshake uses the current files, read again only when they change."""
        files = self.files()
        current = files.check()
        return grpc.dynamic_ssl_server_credentials(
            _server_config(current),
            # types-grpcio omits the None ("keep the current one") that gRPC documents.
            _certificate_fetcher(files, current),  # type: ignore[arg-type]
            require_client_authentication=self.require_client_cert,
        )


def _server_config(material: tlsfiles.Material) -> grpc.ServerCertificateConfiguration:
    assert material.key is not None and material.cert is not None
    return grpc.ssl_server_certificate_configuration(
        [(material.key, material.cert)], root_certificates=material.ca
    )


def _certificate_fetcher(
    files: tlsfiles.WatchedTls, given: tlsfiles.Material
) -> CertificateFetcher:
    """What gRPC calls, in a core thread, before each handshake: a new configuration when
    the files changed since the one it has, else None (keep it). Cheap (stats) and never
    raises: an exception there would fail the handshake."""
    last = [given]

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        material = files.check()
        if material is last[0]:
            return None
        try:
            config = _server_config(material)
        except Exception:
            log.exception("TLS server files %s: cannot build the new configuration", files.paths)
            return None
        last[0] = material
        return config

    return fetch


@dataclass(frozen=True)
class ClientTls:
    """How a client verifies its server (`ca`, else the system roots) and, for mutual TLS,
    the certificate it presents. `server_name` overrides the name checked in the server's
    certificate (a target given as an IP, or a Service name the certificate lacks)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None
    flag_prefix: str = "--peer-tls-"

    def files(self) -> tlsfiles.WatchedTls:
        """The watched files (read and checked the first time; TlsError names the flag)."""
        f = self.flag_prefix
        if bool(self.cert) != bool(self.key):
            raise TlsError(f"{f}cert and {f}key: give both (mutual TLS) or neither")
        return tlsfiles.watch(tlsfiles.Paths("client", self.cert, self.key, self.ca, f))

    def credentials(self) -> grpc.ChannelCredentials:
        """From the current files (TlsError names the flag the first time they are read;
        later, files that cannot be used keep the last good ones). A channel keeps the
        credentials it was made with: `tlsreload.ReloadingChannel` makes a new one."""
        material = self.files().check()
        return grpc.ssl_channel_credentials(
            root_certificates=material.ca,
            private_key=material.key,
            certificate_chain=material.cert,
        )


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
    tls: ServerTls | None = None,
) -> GrpcServer:
    """Start a gRPC aio server on `listen` ("host:port", port 0 = any), plaintext or with
    `tls`; health starts NOT_SERVING until the service calls `set_serving(True)`.
    `max_connection_age_s` makes clients reconnect (and so re-resolve a DNS name)
    periodically: binders use it so a scheduler's round robin over a headless Service finds
    replicas added later."""
    options = _options(max_message_bytes)
    if max_connection_age_s:
        options += [
            ("grpc.max_connection_age_ms", int(max_connection_age_s * 1000)),
            ("grpc.max_connection_age_grace_ms", 10_000),
        ]
    # Undecodable requests get INVALID_ARGUMENT, not UNKNOWN (see grpcguard).
    guard = grpcguard.MalformedRequests()
    server = grpc.aio.server(options=options, interceptors=(guard, *interceptors))
    for add, servicer in servicers:
        add(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable(server, (*service_names, health.SERVICE_NAME))
    if tls is None:
        port = server.add_insecure_port(listen)
    else:
        port = server.add_secure_port(listen, tls.credentials())
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
    tls: ClientTls | None = None,
) -> grpc.aio.Channel:
    """A client channel, plaintext or with `tls`. With `round_robin`, `target` may be
    `dns:///binders:50052` (a headless Service) or a comma-separated static list
    `ipv4:a:p,b:p` form accepted by gRPC; every resolved address gets calls in turn."""
    options = _options(max_message_bytes)
    # gRPC's default reconnect backoff grows to 2 minutes; our peers restart in seconds.
    options += [
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ]
    if round_robin:
        options.append(("grpc.lb_policy_name", "round_robin"))
    return open_channel(target, options=options, tls=tls)


def open_channel(
    target: str, *, options: Sequence[tuple[str, Any]], tls: ClientTls | None
) -> grpc.aio.Channel:
    """`target` with exactly `options`: plaintext, or TLS (with the server-name override)."""
    if tls is None:
        return grpc.aio.insecure_channel(target, options=list(options))
    opts = list(options)
    if tls.server_name:
        opts.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.aio.secure_channel(target, tls.credentials(), options=opts)


def host_port(listen: str, port: int) -> str:
    host = listen.rsplit(":", 1)[0] or "0.0.0.0"
    return f"{host}:{port}"
