"""What `splitsched up` would start, without starting it (`splitsched.up.plan`): the
watcher and the binders with the kubeconfig's identity and context, the scheduler with no
Kubernetes credentials at all, mutual TLS unless --insecure, the profiles' schedulerNames
everywhere they matter, and the CLI's settings."""

from __future__ import annotations

import itertools
import json
import shlex
from pathlib import Path

import pytest

from splitsched.launch.processes import Service
from splitsched.up import plan


def _options(tmp_path: Path, **kw: object) -> plan.Options:
    base: dict[str, object] = {
        "kubeconfig": tmp_path / "kubeconfig",
        "context": None,
        "binders": 2,
        "profiles": None,
        "scheduler_names": (),
        "listen": "127.0.0.1:50050",
        "state_dir": tmp_path / "state",
    }
    return plan.Options(**{**base, **kw})  # type: ignore[arg-type]


def _services(opts: plan.Options) -> dict[str, Service]:
    ports = itertools.count(21000)
    return {s.name: s for s in plan.services(opts, free_port=lambda: next(ports))}


def _flag(svc: Service, flag: str) -> str | None:
    return svc.argv[svc.argv.index(flag) + 1] if flag in svc.argv else None


def test_the_watcher_and_binders_use_the_kubeconfig_the_scheduler_has_none(
    tmp_path: Path,
) -> None:
    opts = _options(tmp_path, context="kind-kind")
    svcs = _services(opts)
    assert list(svcs) == ["watcher", "binder-0", "binder-1", "scheduler"]
    for name in ("watcher", "binder-0", "binder-1"):
        assert _flag(svcs[name], "--kubeconfig") == str(tmp_path / "kubeconfig")
        assert _flag(svcs[name], "--context") == "kind-kind"
    assert "--kubeconfig" not in svcs["scheduler"].argv
    assert "--context" not in svcs["scheduler"].argv
    assert svcs["watcher"].argv[1:4] == ["-m", "splitsched.launch.orphanguard", "services.watcher"]
    assert svcs["binder-1"].log_path == tmp_path / "state" / "logs" / "binder-1.log"


def test_the_scheduler_listens_where_asked_and_dials_the_others(tmp_path: Path) -> None:
    svcs = _services(_options(tmp_path, listen="0.0.0.0:50077"))
    scheduler = svcs["scheduler"]
    assert _flag(scheduler, "--listen") == "0.0.0.0:50077" and scheduler.grpc_port == 50077
    assert _flag(scheduler, "--watcher") == svcs["watcher"].grpc_target
    targets = f"{svcs['binder-0'].grpc_target},{svcs['binder-1'].grpc_target}"
    assert _flag(scheduler, "--binders") == f"ipv4:{targets}"
    for name in ("binder-0", "binder-1"):
        assert _flag(svcs[name], "--scheduler") == "127.0.0.1:50077"  # the wildcard, dialled
        assert _flag(svcs[name], "--binder-id") == name
    ports = {p for s in svcs.values() for p in (s.grpc_port, s.http_port)}
    assert len(ports) == 2 * len(svcs)


def test_mutual_tls_by_default_plaintext_with_insecure(tmp_path: Path) -> None:
    tls = tmp_path / "state" / "tls"
    svcs = _services(_options(tmp_path))
    assert _flag(svcs["binder-0"], "--tls-cert") == str(tls / "binder.crt")
    assert _flag(svcs["scheduler"], "--trusted-clients") == (
        "splitsched-binder,Simulate=splitsched-ops"
    )
    assert _flag(svcs["watcher"], "--trusted-clients") == "splitsched-scheduler"
    plain = _services(_options(tmp_path, tls=False))
    assert not any("--tls-cert" in s.argv for s in plain.values())


def test_a_config_s_profiles_reach_the_scheduler_and_their_names_the_others(
    tmp_path: Path,
) -> None:
    profiles = tmp_path / "sched.yaml"
    opts = _options(tmp_path, profiles=profiles, scheduler_names=("a", "b"))
    svcs = _services(opts)
    assert _flag(svcs["scheduler"], "--profiles") == str(profiles)
    for name in ("watcher", "binder-0", "binder-1"):
        assert _flag(svcs[name], "--scheduler-names") == "a,b"
    assert opts.first_scheduler_name == "a"
    default = _services(_options(tmp_path))
    assert "--profiles" not in default["scheduler"].argv
    assert "--scheduler-names" not in default["binder-0"].argv  # the binder's default
    assert _options(tmp_path).first_scheduler_name == "splitsched"


def test_the_cli_settings_point_at_the_scheduler_as_ops(tmp_path: Path) -> None:
    text = plan.cli_env_file(_options(tmp_path, listen="0.0.0.0:50050"))
    env = dict(
        line.removeprefix("export ").split("=", 1) for line in text.splitlines() if "=" in line
    )
    tls = tmp_path / "state" / "tls"
    assert env == {
        "SPLITSCHED_SERVER": "127.0.0.1:50050",
        "SPLITSCHED_CA": shlex.quote(str(tls / "ca.crt")),
        "SPLITSCHED_CERT": shlex.quote(str(tls / "ops.crt")),
        "SPLITSCHED_KEY": shlex.quote(str(tls / "ops.key")),
    }
    plain = plan.cli_env_file(_options(tmp_path, tls=False))
    assert plain.splitlines() == [
        "export SPLITSCHED_SERVER=127.0.0.1:50050",
        "unset SPLITSCHED_CA SPLITSCHED_CERT SPLITSCHED_KEY",
    ]


def test_the_default_state_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert plan.default_state_dir() == tmp_path / "splitsched" / "up"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert plan.default_state_dir() == Path.home() / ".local" / "state" / "splitsched" / "up"


def test_services_json_names_each_service_and_its_loopback_addresses(tmp_path: Path) -> None:
    """What tools (the demo) read to reach each service's /metrics once `up` is ready."""
    services = list(_services(_options(tmp_path, binders=2)).values())
    listed = json.loads(plan.services_json(services))
    assert [s["name"] for s in listed] == ["watcher", "binder-0", "binder-1", "scheduler"]
    by_name = {s["name"]: s for s in listed}
    binder = _services(_options(tmp_path, binders=2))["binder-1"]
    assert by_name["binder-1"] == {
        "name": "binder-1",
        "grpc": binder.grpc_target,
        "http": binder.http_url,
    }
    assert plan.Layout(tmp_path).services_file == tmp_path / "services.json"
