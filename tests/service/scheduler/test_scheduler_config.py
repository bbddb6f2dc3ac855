"""The scheduler service reads an unmodified KubeSchedulerConfiguration from --profiles: it
logs each field it ignores once at start, gives the queue the configuration's backoff,
and refuses a typo (exit 2, kube-scheduler's words, before anything listens)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from services.scheduler import main as scheduler_main
from services.scheduler.settings import SchedulerSettings

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
profiles:
  - schedulerName: splitsched
  - schedulerName: splitsched-binpack
    percentageOfNodesToScore: 40
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
"""


def test_the_configuration_is_applied_and_its_ignored_fields_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="splitsched.scheduler")
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    svc = scheduler_main.SchedulerService(
        SchedulerSettings.load(["--profiles", str(path)], environ={})
    )
    assert set(svc.state.algo.profiles) == {"splitsched", "splitsched-binpack"}
    queue = svc.state.queue
    assert (queue.initial_backoff, queue.max_backoff) == (2, 20)
    notes = [r for r in caplog.records if r.getMessage().startswith("scheduler config: ")]
    assert [r.getMessage().split(": ")[1] for r in notes] == [
        "leaderElection",
        "profiles[1].percentageOfNodesToScore",
    ]
    assert all(r.levelno == logging.WARNING for r in notes)


def test_a_typo_stops_the_scheduler_before_it_listens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = logging.getLogger()  # `main` sets up logging: the root logger is given back after
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.replace("podMaxBackoffSeconds", "podMaxBackofSeconds"))
    argv = ["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--profiles", str(path)]
    assert scheduler_main.main(argv) == 2
    captured = capsys.readouterr()
    assert 'strict decoding error: unknown field "podMaxBackofSeconds"' in captured.err
    assert "listening" not in captured.out
