"""The watcher's settings (`services.watcher.settings`): built once from flags > environment
> config file > defaults into a frozen value, checked there with errors that name the
flag."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from services.watcher.settings import WatcherSettings
from splitsched.runtime.config import ConfigError


def test_defaults() -> None:
    s = WatcherSettings.load([], environ={})
    assert s.common.kubeconfig is None and s.common.kube_context is None
    assert (s.ring_size, s.page_size, s.watch_timeout) == (100_000, 500, 300)
    assert s.scheduler_names == () and s.pdbs
    assert (s.common.serving.listen, s.common.serving.http_listen) == (
        "0.0.0.0:50051",
        "0.0.0.0:9091",
    )
    assert s.common.security.server is None and s.common.security.peer is None
    assert (s.common.logging.json_lines, s.common.logging.level) == (False, "INFO")


def test_flags_win_over_environment_and_environment_over_the_config_file(tmp_path: Path) -> None:
    config_file = tmp_path / "watcher.yaml"
    config_file.write_text("ring-size: 7\npage-size: 8\nno-pdbs: true\nlog-level: DEBUG\n")
    env = {
        "SPLITSCHED_WATCHER_CONFIG": str(config_file),
        "SPLITSCHED_WATCHER_PAGE_SIZE": "9",
        "SPLITSCHED_WATCHER_SCHEDULER_NAMES": "a,b",
    }
    s = WatcherSettings.load(["--page-size", "10", "--scheduler-names", "c,d", "e"], environ=env)
    assert (s.ring_size, s.page_size, s.pdbs) == (7, 10, False)
    assert s.scheduler_names == ("c", "d", "e")
    assert s.common.logging.level == "DEBUG"
    assert WatcherSettings.load([], environ=env).scheduler_names == ("a", "b")


def test_settings_are_frozen() -> None:
    s = WatcherSettings.load([], environ={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.ring_size = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ring-size", "0"], "--ring-size must be at least 1, got 0"),
        (["--page-size", "0"], "--page-size must be at least 1, got 0"),
        (["--listen", "50051"], "--listen '50051': expected host:port"),
        (["--http-listen", "x:y"], "--http-listen 'x:y': expected host:port"),
        (["--tls-ca", "ca.crt"], "--tls-ca / --tls-client-auth need --tls-cert and --tls-key"),
        (["--context", "kind"], "--context needs --kubeconfig (the in-cluster config has none)"),
    ],
)
def test_unusable_values_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        WatcherSettings.load(argv, environ={})
    assert str(err.value) == message


def test_a_context_picks_one_of_the_kubeconfig_s_contexts() -> None:
    s = WatcherSettings.load(
        ["--kubeconfig", "k.yaml"], environ={"SPLITSCHED_WATCHER_CONTEXT": "b"}
    )
    assert (s.common.kubeconfig, s.common.kube_context) == ("k.yaml", "b")
