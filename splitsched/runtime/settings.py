"""The settings every service shares, typed and checked once at start.

Each service has a frozen settings dataclass (`services.watcher.settings`,
`services.binder.settings`), a `ServiceSettings` built once by its ``load``, before
anything runs, from the options `splitsched.runtime.config.parse_args` resolved (flags >
``SPLITSCHED_<SERVICE>_*`` environment > ``--config`` file > defaults). The parts they
have in common live here (`Common`): where the service listens, how it logs, its gRPC TLS
and caller identity (`splitsched.runtime.security`) and its kubeconfig. Tracing is
configured by the standard ``OTEL_*`` variables, read by `splitsched.runtime.tracing`.

A value that cannot be used raises `ConfigError` naming the flag; nothing changes the
settings after they are built. The service skeleton (`splitsched.runtime.service`) runs
a service from them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from google.protobuf.descriptor import ServiceDescriptor

from splitsched.runtime import config, security
from splitsched.runtime.config import ConfigError


@dataclass(frozen=True)
class Serving:
    """Where the service listens: gRPC (``--listen``) and HTTP health and metrics
    (``--http-listen``), each ``host:port`` (port 0: any free port)."""

    listen: str
    http_listen: str

    @property
    def http_host(self) -> str:
        return _split(self.http_listen)[0]

    @property
    def http_port(self) -> int:
        return _split(self.http_listen)[1]


@dataclass(frozen=True)
class Logging:
    """``--log-json`` and ``--log-level`` (an unknown level logs a warning and uses INFO)."""

    json_lines: bool = False
    level: str = "INFO"


@dataclass(frozen=True)
class Common:
    """What every service's settings hold besides its own options."""

    serving: Serving
    logging: Logging
    security: security.Security
    #: The kubeconfig file (``--kubeconfig``); None: the in-cluster config.
    kubeconfig: str | None = None
    #: The kubeconfig's context to use (``--context``); None: its current context.
    kube_context: str | None = None


def add_flags(
    parser: argparse.ArgumentParser, *, listen: str, http_listen: str, kubeconfig: str
) -> None:
    """The flags `common_from_args` reads besides TLS (`security.add_flags`) and logging
    (`config.parse_args`): `kubeconfig` is the help text of ``--kubeconfig``."""
    parser.add_argument("--kubeconfig", default=None, help=kubeconfig)
    parser.add_argument(
        "--context", default=None, help="the kubeconfig's context (default: its current one)"
    )
    parser.add_argument("--listen", default=listen, help="gRPC host:port")
    parser.add_argument("--http-listen", default=http_listen, help="health/metrics host:port")


def common_from_args(args: argparse.Namespace, *, service: ServiceDescriptor) -> Common:
    """The shared part of a service's settings from its resolved options; reads and checks
    the TLS files now. Raises ConfigError naming the flag."""
    kubeconfig = getattr(args, "kubeconfig", None) or None
    kube_context = getattr(args, "context", None) or None
    if kube_context and not kubeconfig:
        raise ConfigError("--context needs --kubeconfig (the in-cluster config has none)")
    return Common(
        serving=Serving(
            listen=listen_address(args.listen, flag="--listen"),
            http_listen=listen_address(args.http_listen, flag="--http-listen"),
        ),
        logging=Logging(json_lines=bool(args.log_json), level=str(args.log_level)),
        security=security.from_args(args, service=service),
        kubeconfig=kubeconfig,
        kube_context=kube_context,
    )


@dataclass(frozen=True)
class ServiceSettings:
    """The base of each service's settings: the shared part, and one way to load them.

    A subclass names its environment prefix and its flags as class arguments
    (``class WatcherSettings(ServiceSettings, env_prefix=..., parser=build_parser)``)
    and builds itself from the resolved options in `from_args`, checking them there."""

    common: Common

    #: ``SPLITSCHED_<SERVICE>``: the prefix of the service's environment variables.
    env_prefix: ClassVar[str] = ""
    #: Builds the service's argument parser.
    parser: ClassVar[Callable[[], argparse.ArgumentParser]]

    def __init_subclass__(
        cls,
        *,
        env_prefix: str = "",
        parser: Callable[[], argparse.ArgumentParser] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if env_prefix:
            cls.env_prefix = env_prefix
        if parser is not None:
            cls.parser = parser

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Self:
        raise NotImplementedError

    @classmethod
    def load(
        cls, argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None
    ) -> Self:
        """From `argv`, `environ` (default: the process's) and the ``--config`` file, in
        that order of precedence, over the parser's defaults."""
        args = config.parse_args(cls.parser(), argv, env_prefix=cls.env_prefix, environ=environ)
        return cls.from_args(args)


def listen_address(value: object, *, flag: str) -> str:
    """`value` when it is ``host:port`` with a port from 0 to 65535 (an empty host means
    every address), else ConfigError naming `flag`."""
    text = str(value or "")
    try:
        _split(text)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected host:port") from None
    return text


def at_least(value: float, minimum: float, *, flag: str) -> None:
    """ConfigError naming `flag` unless `value` >= `minimum`."""
    if value < minimum:
        raise ConfigError(f"{flag} must be at least {minimum:g}, got {value:g}")


def split_names(raw: object) -> tuple[str, ...]:
    """A list option given as repeated values, comma-separated text, or both."""
    parts = raw if isinstance(raw, list | tuple) else [raw]
    names = (name.strip() for part in parts for name in str(part or "").split(","))
    return tuple(name for name in names if name)


def _split(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    number = int(port)  # ValueError when not a number
    if not sep or not 0 <= number <= 65535:
        raise ValueError(listen)
    return host or "0.0.0.0", number
