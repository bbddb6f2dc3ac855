"""The binder's settings (`services.binder.settings`): built once from flags > environment >
config file > defaults into a frozen value, checked there with errors that name the
flag; the replica id is fixed when the settings are built."""

from __future__ import annotations

import os
import socket

import pytest

from services.binder.settings import BinderSettings
from splitsched.runtime.config import ConfigError

SCHEDULER = ["--scheduler", "127.0.0.1:50050"]


def test_defaults_and_the_replica_id() -> None:
    s = BinderSettings.load(SCHEDULER, environ={})
    assert s.scheduler == "127.0.0.1:50050" and s.common.kubeconfig is None
    assert s.binder_id == f"{socket.gethostname()}-{os.getpid()}"
    assert (s.workers, s.max_pending, s.qps, s.burst) == (64, 10_000, 0.0, 0)
    assert (s.shutdown_grace, s.preempt_deadline, s.report_flush_timeout) == (20.0, 30.0, 10.0)
    assert s.max_report_buffer == 100_000
    assert s.common.serving.listen == "0.0.0.0:50052"
    assert s.common.serving.http_listen == "0.0.0.0:9092"
    assert BinderSettings.load([*SCHEDULER, "--binder-id", "b-1"], environ={}).binder_id == "b-1"


def test_the_scheduler_may_come_from_the_environment_and_flags_win() -> None:
    env = {"SPLITSCHED_BINDER_SCHEDULER": "env:1", "SPLITSCHED_BINDER_WORKERS": "3"}
    s = BinderSettings.load([], environ=env)
    assert (s.scheduler, s.workers) == ("env:1", 3)
    assert BinderSettings.load(["--workers", "5"], environ=env).workers == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--scheduler (or $SPLITSCHED_BINDER_SCHEDULER) is required"),
        ([*SCHEDULER, "--workers", "0"], "--workers must be at least 1, got 0"),
        ([*SCHEDULER, "--max-pending", "0"], "--max-pending must be at least 1, got 0"),
        ([*SCHEDULER, "--preempt-deadline", "0"], "--preempt-deadline must be positive"),
        ([*SCHEDULER, "--listen", "nope"], "--listen 'nope': expected host:port"),
        (
            [*SCHEDULER, "--peer-server-name", "x"],
            "--peer-server-name needs --peer-tls-ca (TLS to the peers)",
        ),
    ],
)
def test_unusable_values_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        BinderSettings.load(argv, environ={})
    assert str(err.value) == message


def test_the_profiles_served_default_to_splitsched_and_cannot_be_none() -> None:
    assert BinderSettings.load(SCHEDULER, environ={}).scheduler_names == ("splitsched",)
    both = BinderSettings.load([*SCHEDULER, "--scheduler-names", "a,b", "c"], environ={})
    assert both.scheduler_names == ("a", "b", "c")
    env = {"SPLITSCHED_BINDER_SCHEDULER_NAMES": "x,y"}
    assert BinderSettings.load(SCHEDULER, environ=env).scheduler_names == ("x", "y")
    with pytest.raises(ConfigError, match="--scheduler-names must name at least one"):
        BinderSettings.load([*SCHEDULER, "--scheduler-names", ","], environ={})
