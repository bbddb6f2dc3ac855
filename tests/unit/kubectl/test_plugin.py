"""`kubectl-splitsched` as a whole, with no cluster: help, `up` handed to the CLI with
kubectl's kubeconfig and context, offline `simulate --cluster` passed through, and a
reader that leaves early (`| head -1`) ending it quietly with 141."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from splitsched import cli
from splitsched import kubectl as plugin
from tests.support import pipes

SAMPLE_CLUSTER = Path(__file__).resolve().parents[3] / "examples" / "sample-cluster.yaml"


def test_help_lists_kubectl_s_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert plugin.main(["--help"]) == 0
    assert "-n, --namespace NS" in capsys.readouterr().out
    assert plugin.main([]) == 2  # no command: the help, as a usage error


def test_up_gets_kubectl_s_kubeconfig_and_context(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def cli_main(argv: list[str]) -> int:
        seen.append(argv)
        return 0

    monkeypatch.setattr(cli, "main", cli_main)
    assert plugin.main(["--context", "kind", "up", "--binders", "1"]) == 0
    assert seen == [["up", "--binders", "1", "--context", "kind"]]


def test_a_reader_that_leaves_early_ends_the_output_quietly() -> None:
    first, code, err = pipes.head_one(
        [sys.executable, "-m", "splitsched.kubectl", "simulate", "--cluster", str(SAMPLE_CLUSTER)]
    )
    assert code == cli.EXIT_CLOSED_PIPE, err
    assert json.loads(first)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
