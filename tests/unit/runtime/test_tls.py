"""TLS configuration without a network: `grpcsrv.ServerTls`/`ClientTls` refuse unusable
files at startup naming the flag (and never echo a key), `security.from_args` resolves the
services' real flags (flags > env > config file) and refuses contradictory ones, and
`security.peer_identities` reads identities the way the interceptor does."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from services.binder import settings as binder_settings
from services.scheduler import settings as scheduler_settings
from services.watcher import settings as watcher_settings
from splitsched.runtime import config, grpcsrv, security
from tests.support import certs

Parser = Callable[[], argparse.ArgumentParser]
SERVICES: dict[str, tuple[Parser, str, object]] = {
    "scheduler": (
        scheduler_settings.build_parser,
        scheduler_settings.ENV_PREFIX,
        scheduler_settings.SERVICE,
    ),
    "binder": (binder_settings.build_parser, binder_settings.ENV_PREFIX, binder_settings.SERVICE),
    "watcher": (
        watcher_settings.build_parser,
        watcher_settings.ENV_PREFIX,
        watcher_settings.SERVICE,
    ),
}


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    certs.write_stack_certs(d)
    return d


def resolve(
    component: str, argv: list[str], env: dict[str, str] | None = None
) -> security.Security:
    build, prefix, service = SERVICES[component]
    args = config.parse_args(build(), argv, env_prefix=prefix, environ=env or {})
    return security.from_args(args, service=service)  # type: ignore[arg-type]


def mtls(d: Path, who: str = "scheduler") -> list[str]:
    return [
        "--tls-cert", str(d / f"{who}.crt"), "--tls-key", str(d / f"{who}.key"),
        "--tls-ca", str(d / "ca.crt"), "--tls-client-auth",
    ]  # fmt: skip


# ---- files ----------------------------------------------------------------------------------


def test_missing_unreadable_or_non_pem_files_name_their_flag(tls_dir: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.crt")
    with pytest.raises(grpcsrv.TlsError, match=r"^--tls-cert .*nope\.crt: cannot read"):
        grpcsrv.ServerTls(cert=missing, key=str(tls_dir / "scheduler.key")).credentials()
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("hello\n")
    with pytest.raises(grpcsrv.TlsError, match=r"^--tls-key .*garbage\.pem: not a PEM"):
        grpcsrv.ServerTls(cert=str(tls_dir / "scheduler.crt"), key=str(garbage)).credentials()
    with pytest.raises(grpcsrv.TlsError, match=r"^--peer-tls-ca .*garbage\.pem: not a PEM"):
        grpcsrv.ClientTls(ca=str(garbage)).credentials()
    # A certificate where the key should be: the key flag is named.
    with pytest.raises(grpcsrv.TlsError, match=r"^--peer-tls-key .*binder\.crt: not a PEM"):
        grpcsrv.ClientTls(
            cert=str(tls_dir / "binder.crt"), key=str(tls_dir / "binder.crt")
        ).credentials()


def test_a_key_that_is_not_the_certificates_is_refused_without_echoing_it(tls_dir: Path) -> None:
    with pytest.raises(grpcsrv.TlsError) as err:
        grpcsrv.ServerTls(
            cert=str(tls_dir / "scheduler.crt"), key=str(tls_dir / "binder.key")
        ).credentials()
    message = str(err.value)
    assert message.startswith("--tls-cert ") and "--tls-key " in message
    assert "BEGIN" not in message and "PRIVATE" not in message


def test_client_cert_without_key_and_client_auth_without_ca_are_refused(tls_dir: Path) -> None:
    with pytest.raises(grpcsrv.TlsError, match="--peer-tls-cert and --peer-tls-key: give both"):
        grpcsrv.ClientTls(cert=str(tls_dir / "binder.crt")).credentials()
    with pytest.raises(grpcsrv.TlsError, match="--tls-client-auth needs --tls-ca"):
        grpcsrv.ServerTls(
            cert=str(tls_dir / "scheduler.crt"),
            key=str(tls_dir / "scheduler.key"),
            require_client_cert=True,
        ).credentials()


# ---- flags ----------------------------------------------------------------------------------


def test_no_flags_means_plaintext_and_nothing_restricted() -> None:
    for component in SERVICES:
        sec = resolve(component, [])
        assert (sec.server, sec.peer, sec.interceptors) == (None, None, ())


def test_mutual_tls_with_trusted_clients_restricts_each_services_default_rpcs(
    tls_dir: Path,
) -> None:
    expected = {
        "scheduler": {"ReportBindingOutcome", "Simulate"},
        "binder": {"Bind", "BindBatch", "ReportUnschedulable", "Preempt"},
        "watcher": {"StreamClusterEvents"},
    }
    for component, methods in expected.items():
        sec = resolve(component, [*mtls(tls_dir), "--trusted-clients", "a, b"])
        assert sec.server is not None and sec.server.require_client_cert
        [guard] = sec.interceptors
        assert isinstance(guard, security.TrustedClients)
        assert guard.trusted == {"a", "b"}
        assert {m.rsplit("/", 1)[1] for m in guard.methods} == methods
        assert all(m.startswith("/splitsched.v1.") for m in guard.methods)


def test_restrict_rpcs_overrides_the_default_and_unknown_names_fail(tls_dir: Path) -> None:
    sec = resolve("scheduler", [*mtls(tls_dir), "--trusted-clients", "x", "--restrict-rpcs",
                                "Explain,ListPods"])  # fmt: skip
    [guard] = sec.interceptors
    assert isinstance(guard, security.TrustedClients)
    assert guard.methods == {
        "/splitsched.v1.Scheduler/Explain",
        "/splitsched.v1.Scheduler/ListPods",
    }
    with pytest.raises(config.ConfigError, match="Scheduler has no RPC Bogus, Nope"):
        resolve("scheduler", [*mtls(tls_dir), "--restrict-rpcs", "Simulate,Bogus,Nope"])
    # An empty list restricts nothing even with trusted clients.
    sec = resolve("scheduler", [*mtls(tls_dir), "--trusted-clients", "x", "--restrict-rpcs", ""])
    assert sec.interceptors == ()


def test_a_method_entry_trusts_a_name_for_that_restricted_rpc_only(tls_dir: Path) -> None:
    sec = resolve("scheduler", [*mtls(tls_dir), "--trusted-clients",
                                "binder,Simulate=ops,Simulate=tools"])  # fmt: skip
    [guard] = sec.interceptors
    assert isinstance(guard, security.TrustedClients)
    assert guard.trusted == {"binder"}
    assert guard.per_method == {"/splitsched.v1.Scheduler/Simulate": {"ops", "tools"}}
    # Only method entries: still restricted, and still needs mutual TLS.
    sec = resolve("scheduler", [*mtls(tls_dir), "--trusted-clients", "Simulate=ops"])
    assert len(sec.interceptors) == 1
    for bad in ("Explain=ops", "Simulate=", "Bogus=x"):  # not restricted, empty, unknown
        with pytest.raises(config.ConfigError, match="want Method=identity"):
            resolve("scheduler", [*mtls(tls_dir), "--trusted-clients", bad])


def test_contradictory_flags_are_refused(tls_dir: Path) -> None:
    cert = [
        "--tls-cert",
        str(tls_dir / "scheduler.crt"),
        "--tls-key",
        str(tls_dir / "scheduler.key"),
    ]
    cases = {
        "needs mutual TLS": [*cert, "--trusted-clients", "binder"],
        "--tls-cert and --tls-key: give both": ["--tls-cert", str(tls_dir / "scheduler.crt")],
        "need --tls-cert and --tls-key": ["--tls-client-auth"],
        "add --tls-client-auth": [*cert, "--tls-ca", str(tls_dir / "ca.crt")],
        "--peer-server-name needs --peer-tls-ca": ["--peer-server-name", "x"],
    }
    for expected, argv in cases.items():
        with pytest.raises(config.ConfigError, match=expected):
            resolve("scheduler", argv)


def test_flags_win_over_environment_and_environment_over_defaults(tls_dir: Path) -> None:
    env = {
        "SPLITSCHED_BINDER_PEER_TLS_CA": str(tls_dir / "ca.crt"),
        "SPLITSCHED_BINDER_PEER_SERVER_NAME": "from-env",
        "SPLITSCHED_BINDER_TRUSTED_CLIENTS": "env-client",
        "SPLITSCHED_BINDER_TLS_CLIENT_AUTH": "true",
    }
    env["SPLITSCHED_BINDER_TLS_CERT"] = str(tls_dir / "binder.crt")
    env["SPLITSCHED_BINDER_TLS_KEY"] = str(tls_dir / "binder.key")
    env["SPLITSCHED_BINDER_TLS_CA"] = str(tls_dir / "ca.crt")
    sec = resolve("binder", ["--peer-server-name", "from-flag"], env)
    assert sec.peer is not None and sec.peer.server_name == "from-flag"
    assert sec.server is not None and sec.server.cert.endswith("binder.crt")
    [guard] = sec.interceptors
    assert isinstance(guard, security.TrustedClients) and guard.trusted == {"env-client"}


def test_the_watcher_has_no_outgoing_channel_flags() -> None:
    with pytest.raises(SystemExit):
        resolve("watcher", ["--peer-tls-ca", "x"])


# ---- identities -----------------------------------------------------------------------------


def test_identities_are_the_common_name_and_dns_and_uri_sans_not_ips() -> None:
    auth = {
        "transport_security_type": [b"ssl"],
        "x509_common_name": [b"splitsched-binder"],
        "x509_subject_alternative_name": [b"binder.svc", b"10.0.0.1", b"spiffe://c/sa/b"],
        "peer_dns": [b"binder.svc"],
        "peer_ip": [b"10.0.0.1"],
        "peer_uri": [b"spiffe://c/sa/b"],
    }
    assert security.peer_identities(auth) == {"splitsched-binder", "binder.svc", "spiffe://c/sa/b"}
    assert security.peer_identities({"transport_security_type": [b"ssl"]}) == frozenset()
