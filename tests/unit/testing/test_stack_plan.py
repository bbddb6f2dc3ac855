"""What the stack would start, without starting it: each service's command line (ports,
peers, leader election, TLS) and the check that several schedulers need a Lease; mutual
TLS by default, with certificates where the flags and the clients look for them. And,
starting a trivial process, that each start begins a service's log afresh."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from splitsched.launch import certs
from splitsched.testing.stack import Service, Stack


def _stack(tmp_path: Path, **kw: Any) -> Stack:
    return Stack(
        workdir=tmp_path,
        watcher_kubeconfig=tmp_path / "watcher.kubeconfig",
        binder_kubeconfig=tmp_path / "binder.kubeconfig",
        **kw,
    )


def _flag(svc: Service, flag: str) -> str:
    return svc.argv[svc.argv.index(flag) + 1]


def test_one_scheduler_binders_dial_it_directly(tmp_path: Path) -> None:
    s = _stack(tmp_path, binder_args=["--x"], tls=False)
    watcher = s._watcher()
    assert watcher.argv[1:4] == ["-m", "splitsched.launch.orphanguard", "services.watcher"]
    assert _flag(watcher, "--kubeconfig") == str(tmp_path / "watcher.kubeconfig")
    assert _flag(watcher, "--listen") == watcher.grpc_target
    binder = s._binder(0, [23456])
    assert _flag(binder, "--scheduler") == "127.0.0.1:23456"
    assert _flag(binder, "--binder-id") == "binder-0"
    assert binder.argv[-1] == "--x"
    scheduler = s._scheduler(0, 23456, watcher=watcher, binders=[binder])
    assert scheduler.name == "scheduler"
    assert scheduler.grpc_port == 23456 and _flag(scheduler, "--listen") == "127.0.0.1:23456"
    assert _flag(scheduler, "--watcher") == watcher.grpc_target
    assert _flag(scheduler, "--binders") == f"ipv4:{binder.grpc_target}"
    assert "--leader-elect" not in scheduler.argv
    assert "--tls-cert" not in scheduler.argv


def test_several_schedulers_elect_a_leader_and_binders_dial_all(tmp_path: Path) -> None:
    s = _stack(tmp_path, schedulers=2, scheduler_kubeconfig=tmp_path / "s.kc", lease_namespace="ns")
    binder = s._binder(1, [23456, 23457])
    assert _flag(binder, "--scheduler") == "ipv4:127.0.0.1:23456,127.0.0.1:23457"
    scheduler = s._scheduler(1, 23457, watcher=s._watcher(), binders=[binder])
    assert scheduler.name == "scheduler-1"
    assert _flag(scheduler, "--scheduler-id") == "scheduler-1"
    assert _flag(scheduler, "--lease-namespace") == "ns"
    assert _flag(scheduler, "--kubeconfig") == str(tmp_path / "s.kc")
    assert "--leader-elect" in scheduler.argv


def test_several_schedulers_without_a_lease_are_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    s = _stack(tmp_path / "work", schedulers=2)
    with pytest.raises(ValueError, match="scheduler_kubeconfig and lease_namespace"):
        s.start()
    assert s.services == []
    assert not (tmp_path / "work").exists()


def test_tls_gives_every_service_its_certificate_and_peers_the_ca(tmp_path: Path) -> None:
    s = _stack(tmp_path, tls=tmp_path / "certs")
    watcher = s._watcher()
    assert _flag(watcher, "--tls-cert") == str(tmp_path / "certs" / "watcher.crt")
    assert _flag(watcher, "--trusted-clients") == "splitsched-scheduler"
    assert "--peer-tls-ca" not in watcher.argv  # the watcher dials nobody
    binder = s._binder(0, [23456])
    assert _flag(binder, "--tls-key") == str(tmp_path / "certs" / "binder.key")
    assert _flag(binder, "--peer-tls-ca") == str(tmp_path / "certs" / "ca.crt")
    assert _flag(binder, "--peer-server-name") == "localhost"
    scheduler = s._scheduler(0, 23456, watcher=watcher, binders=[binder])
    assert _flag(scheduler, "--trusted-clients") == "splitsched-binder,Simulate=splitsched-ops"


def test_mutual_tls_is_the_default_from_certificates_in_the_workdir(tmp_path: Path) -> None:
    s = _stack(tmp_path)
    tls = tmp_path / "tls"
    assert s.tls_dir == tls
    binder = s._binder(0, [23456])
    assert _flag(binder, "--tls-cert") == str(tls / "binder.crt")
    assert "--tls-client-auth" in binder.argv
    assert _flag(binder, "--trusted-clients") == "splitsched-scheduler"
    assert s.cli_env()["SPLITSCHED_CERT"] == str(tls / "ops.crt")
    assert s.cli_env("watcher")["SPLITSCHED_KEY"] == str(tls / "watcher.key")


def test_every_file_the_flags_and_clients_name_is_written_by_the_certificate_maker(
    tmp_path: Path,
) -> None:
    s = _stack(tmp_path)
    assert s.tls_dir is not None
    certs.write_stack_certs(s.tls_dir)
    named = [a for c in ("watcher", "scheduler", "binder") for a in s.tls_args(c) if "/" in a]
    named += [p for who in certs.STACK_COMPONENTS for p in s.cli_env(who).values()]
    assert named and all(Path(p).is_file() for p in named)
    assert s.channel_credentials() is not None


def test_plaintext_only_when_asked(tmp_path: Path) -> None:
    s = _stack(tmp_path, tls=False)
    assert s.tls_dir is None and s.cli_env() == {} and s.channel_credentials() is None
    assert all(not a.startswith("--tls") for a in s._watcher().argv)


def test_each_start_begins_a_services_log_afresh_and_a_restart_appends(tmp_path: Path) -> None:
    """A work dir that outlives a run (the demo's) must not keep the last run's lines
    above this run's: its first "listening" line would name dead ports."""
    s = _stack(tmp_path, tls=False)
    log = tmp_path / "echo.log"
    log.write_text("listening on 127.0.0.1:1111 (the previous run)\n")

    def run(*, append: bool) -> None:
        argv = [sys.executable, "-c", "print('listening on 127.0.0.1:2222')"]
        svc = s._start(Service("echo", argv, log, 0, 0), append=append)
        assert svc.proc is not None and svc.proc.wait(timeout=30) == 0

    run(append=False)
    assert log.read_text() == "listening on 127.0.0.1:2222\n"
    run(append=True)
    assert log.read_text() == "listening on 127.0.0.1:2222\n" * 2
