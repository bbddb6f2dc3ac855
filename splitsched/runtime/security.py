"""TLS flags and caller identity for the three services' gRPC servers and channels.

Each service's `build_parser` calls `add_flags`; its `main` calls `from_args` once at
startup (bad or missing files fail there, naming the flag) and passes the result's
`server` and `interceptors` to `grpcsrv.serve` and its `peer` to `grpcsrv.channel`.

Flags (env `SPLITSCHED_<SERVICE>_<DEST>` and the config file work as for every option):

- `--tls-cert --tls-key` serve TLS; `--tls-ca` with `--tls-client-auth` requires clients
  to present a certificate that CA signed (mutual TLS).
- `--trusted-clients a,b` (needs mutual TLS): the RPCs in `--restrict-rpcs` (each
  service has a default: the mutating or expensive ones) are allowed only to a client
  whose certificate's common name, DNS SAN or URI SAN is in the list; other callers get
  PERMISSION_DENIED naming the method and their identity. An entry `Method=name` trusts
  `name` for that one restricted RPC only (the scheduler's ops tools may Simulate but
  not report binding outcomes). Without the flag no RPC is restricted beyond what the
  TLS handshake already checks. Health and reflection are never restricted.
- `--peer-tls-ca --peer-tls-cert --peer-tls-key --peer-server-name` make the service's own
  outgoing channels TLS (mutual with cert and key).

The files are watched (`tlsfiles`): servers take new ones at the next handshake, the
services' channels at their next call (`tlsreload`), so a rotated Secret needs no restart.
Key and certificate contents are never logged: only paths appear in messages.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import (
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor

from splitsched.runtime import grpcguard, grpcsrv
from splitsched.runtime.config import ConfigError

log = logging.getLogger(__name__)

#: auth_context keys whose values name the peer: the subject's CN and the DNS and URI SANs
#: (IP SANs say where a peer is, not who it is).
IDENTITY_KEYS = ("x509_common_name", "peer_dns", "peer_uri")


@dataclass(frozen=True)
class Security:
    """What `from_args` resolved: the server's TLS, the outgoing channels' TLS, and the
    interceptors that enforce `--trusted-clients` (empty when nothing is restricted)."""

    server: grpcsrv.ServerTls | None = None
    peer: grpcsrv.ClientTls | None = None
    interceptors: tuple[grpc.aio.ServerInterceptor, ...] = ()


def add_flags(
    parser: argparse.ArgumentParser,
    *,
    restricted: Sequence[str] = (),
    peers: bool = True,
) -> None:
    """The TLS and identity flags; `restricted` is the default of `--restrict-rpcs` (method
    names of this service); `peers` adds the flags for outgoing channels."""
    g = parser.add_argument_group("TLS and caller identity (default: plaintext)")
    g.add_argument("--tls-cert", help="this server's certificate chain (PEM): serve TLS")
    g.add_argument("--tls-key", help="this server's private key (PEM)")
    g.add_argument("--tls-ca", help="CA bundle (PEM) that signs client certificates")
    g.add_argument(
        "--tls-client-auth",
        action="store_true",
        default=False,
        help="require a client certificate signed by --tls-ca (mutual TLS)",
    )
    g.add_argument(
        "--trusted-clients",
        default="",
        help="comma-separated client identities (certificate CN, DNS or URI SAN) allowed to "
        "call --restrict-rpcs; needs --tls-client-auth (default: none, nothing restricted)",
    )
    g.add_argument(
        "--restrict-rpcs",
        default=",".join(restricted),
        help="comma-separated RPC names only --trusted-clients may call "
        f"(default: {','.join(restricted) or 'none'})",
    )
    if peers:
        g.add_argument("--peer-tls-ca", help="CA bundle (PEM) to verify the servers this dials")
        g.add_argument("--peer-tls-cert", help="client certificate (PEM) for mutual TLS")
        g.add_argument("--peer-tls-key", help="client private key (PEM) for mutual TLS")
        g.add_argument(
            "--peer-server-name",
            help="expect this name in the servers' certificates (needed when a target is an "
            "IP the certificate lacks, or a list such as ipv4:a:p,b:p, which names no host)",
        )


def _names(raw: object) -> list[str]:
    parts = raw if isinstance(raw, list | tuple) else [raw]
    return [n.strip() for part in parts for n in str(part or "").split(",") if n.strip()]


def from_args(args: argparse.Namespace, *, service: ServiceDescriptor) -> Security:
    """Resolve the flags `add_flags` added and read every file now; raises ConfigError (a
    TlsError for files) whose message names the flag."""
    server: grpcsrv.ServerTls | None = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise ConfigError("--tls-cert and --tls-key: give both or neither")
        server = grpcsrv.ServerTls(
            cert=args.tls_cert,
            key=args.tls_key,
            ca=args.tls_ca,
            require_client_cert=bool(args.tls_client_auth),
        )
        server.files()
    elif args.tls_ca or args.tls_client_auth:
        raise ConfigError("--tls-ca / --tls-client-auth need --tls-cert and --tls-key")
    if server is not None and server.ca and not server.require_client_cert:
        raise ConfigError(
            "--tls-ca is only used to verify client certificates: add --tls-client-auth "
            "(or drop --tls-ca)"
        )

    methods = _names(args.restrict_rpcs)
    trusted, per_method = split_trusted(_names(args.trusted_clients), restricted=methods)
    known = [m.name for m in service.methods]
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise ConfigError(
            f"--restrict-rpcs: {service.name} has no RPC {', '.join(unknown)} "
            f"(it has {', '.join(known)})"
        )
    interceptors: tuple[grpc.aio.ServerInterceptor, ...] = ()
    if trusted or per_method:
        if server is None or not server.require_client_cert:
            raise ConfigError(
                "--trusted-clients needs mutual TLS (--tls-cert, --tls-key, --tls-ca, "
                "--tls-client-auth): identities come from verified client certificates"
            )
        if methods:
            paths = {f"/{service.full_name}/{m}" for m in methods}
            interceptors = (
                TrustedClients(
                    methods=paths,
                    trusted=trusted,
                    per_method={f"/{service.full_name}/{m}": ids for m, ids in per_method.items()},
                ),
            )

    peer: grpcsrv.ClientTls | None = None
    if any(getattr(args, f, None) for f in ("peer_tls_ca", "peer_tls_cert", "peer_tls_key")):
        peer = grpcsrv.ClientTls(
            ca=args.peer_tls_ca,
            cert=args.peer_tls_cert,
            key=args.peer_tls_key,
            server_name=args.peer_server_name,
        )
        peer.files()
    elif getattr(args, "peer_server_name", None):
        raise ConfigError("--peer-server-name needs --peer-tls-ca (TLS to the peers)")
    return Security(server=server, peer=peer, interceptors=interceptors)


def split_trusted(
    entries: Sequence[str], *, restricted: Collection[str]
) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """`--trusted-clients` entries -> (names trusted for every restricted RPC, names
    trusted for one RPC only). `Method=name` must name a restricted RPC: a typo would
    otherwise trust no one, or the wrong method, silently."""
    everywhere: set[str] = set()
    one_rpc: dict[str, set[str]] = {}
    for entry in entries:
        method, sep, name = entry.partition("=")
        if not sep:
            everywhere.add(entry)
            continue
        if method not in restricted or not name:
            raise ConfigError(
                f"--trusted-clients: {entry!r}: want Method=identity with Method one of "
                f"--restrict-rpcs ({', '.join(restricted) or 'none'})"
            )
        one_rpc.setdefault(method, set()).add(name)
    return frozenset(everywhere), {m: frozenset(ids) for m, ids in one_rpc.items()}


def peer_identities(auth_context: Mapping[str, Iterable[bytes]]) -> frozenset[str]:
    """The names a verified client certificate gives its holder (see IDENTITY_KEYS); empty
    without one. gRPC fills auth_context only from a certificate the handshake verified."""
    return frozenset(
        value.decode("utf-8", "replace")
        for key in IDENTITY_KEYS
        for value in auth_context.get(key, ())
    )


class TrustedClients(grpc.aio.ServerInterceptor):
    """Lets only callers whose certificate identity is in `trusted` reach the RPCs in
    `methods` (full paths, "/pkg.Service/Method"), plus those `per_method` trusts for
    that one method; others get PERMISSION_DENIED."""

    def __init__(
        self,
        *,
        methods: Collection[str],
        trusted: Collection[str],
        per_method: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        self.methods = frozenset(methods)
        self.trusted = frozenset(trusted)
        self.per_method = {m: frozenset(ids) for m, ids in (per_method or {}).items()}

    async def _check(self, method: str, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        ids = peer_identities(context.auth_context())
        if ids & (self.trusted | self.per_method.get(method, frozenset())):
            return
        who = ", ".join(sorted(ids)) if ids else "no client certificate"
        log.warning("denied %s to %s (%s)", method, who, context.peer())
        await context.abort(
            grpc.StatusCode.PERMISSION_DENIED,
            f"{method} is restricted to trusted clients; caller identity: {who}",
        )

    async def intercept_service(
        self, continuation: grpcguard.Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpcguard.Handler | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method not in self.methods:
            return handler
        kw: dict[str, Any] = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }

        async def check(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
            await self._check(method, context)

        unary, stream = grpcguard.checked_unary, grpcguard.checked_stream
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(unary(check, handler.unary_unary), **kw)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(stream(check, handler.unary_stream), **kw)
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(unary(check, handler.stream_unary), **kw)
        assert handler.stream_stream is not None
        return grpc.stream_stream_rpc_method_handler(stream(check, handler.stream_stream), **kw)
