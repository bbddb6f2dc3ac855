"""What the stack would start, without starting it: each service's command line (ports,
peers, leader election, TLS) and the check that several schedulers need a Lease."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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
    s = _stack(tmp_path, binder_args=["--x"])
    watcher = s._watcher()
    assert watcher.argv[1:4] == ["-m", "splitsched.testing.orphanguard", "services.watcher"]
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
    assert _flag(scheduler, "--trusted-clients") == "splitsched-binder,splitsched-ops"
