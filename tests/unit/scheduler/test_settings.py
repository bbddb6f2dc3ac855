"""The scheduler's settings (`services.scheduler.settings`): built once from flags >
environment > config file > defaults into a frozen value, checked there with errors that
name the flags; the settle time is resolved there (3 s with leader election, else 0)."""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path

import pytest

from services.scheduler import main as scheduler_main
from services.scheduler.settings import SchedulerSettings
from splitsched.core import profiles
from splitsched.runtime.config import ConfigError

ELECT = ["--leader-elect"]


def test_defaults() -> None:
    s = SchedulerSettings.load([], environ={})
    assert (s.watcher, s.binders) == ("127.0.0.1:50051", "127.0.0.1:50052")
    assert s.profiles is None and s.common.kubeconfig is None
    assert s.scheduler_id == f"{socket.gethostname()}-{os.getpid()}"
    assert (s.bind_timeout, s.bind_attempts, s.settle_seconds) == (30.0, 5, 0.0)
    assert s.volume_bind_timeout is None  # the profiles' bindTimeoutSeconds decide
    assert not s.leader_elect and not s.standby_ready
    assert s.lease_name == "splitsched-scheduler"
    assert (s.lease_duration, s.renew_deadline, s.retry_period) == (10.0, 7.0, 2.0)
    assert s.common.serving.listen == "0.0.0.0:50050"
    assert s.common.serving.http_listen == "0.0.0.0:9090"
    assert s.common.security.server is None and s.common.security.interceptors == ()


def test_settling_defaults_to_3s_with_leader_election_and_a_flag_wins() -> None:
    assert SchedulerSettings.load(ELECT, environ={}).settle_seconds == 3.0
    assert SchedulerSettings.load([*ELECT, "--settle-seconds", "0"], environ={}).settle_seconds == 0
    assert SchedulerSettings.load(["--settle-seconds", "1.5"], environ={}).settle_seconds == 1.5


def test_environment_and_config_file_with_flags_winning(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("binders: file:1\nbind_attempts: 9\nlease_name: from-file\n")
    env = {
        "SPLITSCHED_SCHEDULER_WATCHER": "env:1",
        "SPLITSCHED_SCHEDULER_LEADER_ELECT": "true",
        "SPLITSCHED_SCHEDULER_KUBECONFIG": "/kc",
        "SPLITSCHED_SCHEDULER_LEASE_NAME": "from-env",
    }
    s = SchedulerSettings.load(["--config", str(config)], environ=env)
    assert (s.watcher, s.binders, s.bind_attempts) == ("env:1", "file:1", 9)
    assert s.leader_elect and s.settle_seconds == 3.0 and s.common.kubeconfig == "/kc"
    assert s.lease_name == "from-env"
    s = SchedulerSettings.load(["--config", str(config), "--lease-name", "flag"], environ=env)
    assert s.lease_name == "flag"


def test_settings_are_frozen() -> None:
    s = SchedulerSettings.load([], environ={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.settle_seconds = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [*ELECT, "--renew-deadline", "10"],
            "need --lease-duration > --renew-deadline > --retry-period > 0, got 10 > 10 > 2",
        ),
        (
            [*ELECT, "--retry-period", "7"],
            "need --lease-duration > --renew-deadline > --retry-period > 0, got 10 > 7 > 7",
        ),
        (
            [*ELECT, "--retry-period", "0"],
            "need --lease-duration > --renew-deadline > --retry-period > 0, got 10 > 7 > 0",
        ),
        (["--listen", "nope"], "--listen 'nope': expected host:port"),
        (
            ["--http-listen", "127.0.0.1:99999"],
            "--http-listen '127.0.0.1:99999': expected host:port",
        ),
        (["--peer-server-name", "x"], "--peer-server-name needs --peer-tls-ca (TLS to the peers)"),
        (["--volume-bind-timeout", "0"], "--volume-bind-timeout must be positive, got 0"),
    ],
)
def test_unusable_values_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        SchedulerSettings.load(argv, environ={})
    assert str(err.value) == message


def test_lease_timings_are_only_checked_with_leader_election() -> None:
    """Without --leader-elect no Lease is used, so its timings do not stop a start."""
    s = SchedulerSettings.load(["--renew-deadline", "20"], environ={})
    assert s.renew_deadline == 20.0 and not s.leader_elect


def test_the_volume_deadline_is_the_flag_else_the_profiles_bind_timeout_seconds() -> None:
    """kube-scheduler's VolumeBinding bindTimeoutSeconds (600 s by default) sets the
    deadline of decisions with volume bindings; --volume-bind-timeout overrides it; 0,
    which kube accepts (every volume binding times out at once), is refused here."""
    config = profiles.load_yaml(VOLUME_BINDING_90S)
    default = SchedulerSettings.load([], environ={})
    flagged = SchedulerSettings.load(["--volume-bind-timeout", "45"], environ={})
    assert scheduler_main._volume_bind_timeout(default, profiles.load(None)) == 600.0
    assert scheduler_main._volume_bind_timeout(default, config) == 90.0
    assert scheduler_main._volume_bind_timeout(flagged, config) == 45.0
    zero = profiles.load_yaml(VOLUME_BINDING_90S.replace("90", "0"))
    with pytest.raises(profiles.ProfileError, match="bindTimeoutSeconds must be positive"):
        scheduler_main._volume_bind_timeout(default, zero)


VOLUME_BINDING_90S = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: splitsched
    pluginConfig:
      - name: VolumeBinding
        args:
          bindTimeoutSeconds: 90
"""
