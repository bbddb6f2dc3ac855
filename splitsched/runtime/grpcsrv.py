"""gRPC servers and channels with the settings every service shares: message-size limits,
keepalive, the standard health service and server reflection (so Kubernetes' native gRPC
probes and grpcurl work), client-side round-robin over a DNS name for binders, and optional
TLS on both ends (`ServerTls` for `serve`, `ClientTls` for `channel`; mutual when the
server is given a CA and `require_client_cert`). Certificates are read once at startup:
replacing the files takes a restart. `splitsched.runtime.security` builds both from flags.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from splitsched.runtime import grpcguard, reflection

DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024

AddServicer = Callable[[Any, grpc.aio.Server], None]


class TlsError(ValueError):
    """A certificate, key or CA file that cannot be used; the message names its flag."""


def _read_pem(path: str, *, flag: str, label: str) -> bytes:
    """The file's bytes, or a TlsError naming `flag` when it is unreadable or holds no PEM
    block of the `label` kind ("CERTIFICATE", "PRIVATE KEY")."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TlsError(f"{flag} {path}: cannot read: {exc.strerror or exc}") from None
    if not (b"-----BEGIN " in data and label.encode() + b"-----" in data):
        raise TlsError(f"{flag} {path}: not a PEM file with a {label} block")
    return data


def _check_pair(cert: str, key: str, *, cert_flag: str, key_flag: str) -> None:
    """Refuse a certificate and key that do not parse or do not belong together, at startup
    rather than at the first handshake (gRPC reads the PEM lazily)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, ValueError) as exc:
        # Never the key's contents: only the paths and OpenSSL's reason.
        raise TlsError(
            f"{cert_flag} {cert} / {key_flag} {key}: not a certificate and its private key "
            f"({getattr(exc, 'reason', None) or exc})"
        ) from None


def _check_ca(ca: str, *, flag: str) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        ctx.load_verify_locations(cafile=ca)
    except (ssl.SSLError, ValueError) as exc:
        raise TlsError(f"{flag} {ca}: not a PEM CA bundle ({exc})") from None


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

    def credentials(self) -> grpc.ServerCredentials:
        """Reads and checks the files now; raises TlsError naming the flag."""
        f = self.flag_prefix
        if self.require_client_cert and not self.ca:
            raise TlsError(f"{f}client-auth needs {f}ca (the CA that signs client certificates)")
        cert = _read_pem(self.cert, flag=f"{f}cert", label="CERTIFICATE")
        key = _read_pem(self.key, flag=f"{f}key", label="PRIVATE KEY")
        _check_pair(self.cert, self.key, cert_flag=f"{f}cert", key_flag=f"{f}key")
        root = None
        if self.ca:
            root = _read_pem(self.ca, flag=f"{f}ca", label="CERTIFICATE")
            _check_ca(self.ca, flag=f"{f}ca")
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=root, require_client_auth=self.require_client_cert
        )


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

    def credentials(self) -> grpc.ChannelCredentials:
        """Reads and checks the files now; raises TlsError naming the flag."""
        f = self.flag_prefix
        if bool(self.cert) != bool(self.key):
            raise TlsError(f"{f}cert and {f}key: give both (mutual TLS) or neither")
        root = cert = key = None
        if self.ca:
            root = _read_pem(self.ca, flag=f"{f}ca", label="CERTIFICATE")
            _check_ca(self.ca, flag=f"{f}ca")
        if self.cert and self.key:
            cert = _read_pem(self.cert, flag=f"{f}cert", label="CERTIFICATE")
            key = _read_pem(self.key, flag=f"{f}key", label="PRIVATE KEY")
            _check_pair(self.cert, self.key, cert_flag=f"{f}cert", key_flag=f"{f}key")
        return grpc.ssl_channel_credentials(
            root_certificates=root, private_key=key, certificate_chain=cert
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
