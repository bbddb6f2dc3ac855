"""`splitsched up` refuses what it cannot use before it starts anything, with a message
that names the file, the context or the flag, and exit code 2 (bad input) or 3 (the
cluster cannot be reached). No cluster here: the one "server" refuses connections."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest
import yaml

from splitsched import cli
from splitsched.launch.processes import free_port


def _kubeconfig(tmp_path: Path, *, server: str = "https://127.0.0.1:1") -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": "one", "context": {"cluster": "c", "user": "u"}},
            {"name": "two", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "one",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def _up(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(["up", *argv])
    return code, capsys.readouterr().err


def test_a_missing_kubeconfig_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    code, err = _up(capsys, "--kubeconfig", str(missing), "--state-dir", str(tmp_path))
    assert code == 2
    assert err == f"error: kubeconfig {missing}: no such file\n"


def test_an_unknown_context_lists_the_kubeconfig_s_contexts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _kubeconfig(tmp_path)
    code, err = _up(capsys, "--kubeconfig", str(path), "--context", "three")
    assert code == 2
    assert err == f"error: kubeconfig {path}: no context 'three'; it has: one, two\n"


def test_an_unreachable_cluster_names_the_server_and_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _kubeconfig(tmp_path, server=f"http://127.0.0.1:{free_port()}")
    code, err = _up(capsys, "--kubeconfig", str(path), "--context", "two")
    assert code == 3
    assert err.startswith("error: cannot reach the API server at http://127.0.0.1:")
    assert "(context two)" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--binders", "0"], "--binders must be at least 1"),
        (["--config", "/nonexistent/sched.yaml"], "--config /nonexistent/sched.yaml: No such"),
    ],
)
def test_bad_flags_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, err = _up(capsys, "--kubeconfig", str(_kubeconfig(tmp_path)), *argv)
    assert code == 2
    assert err.startswith(f"error: {message}")


def test_a_bad_scheduler_configuration_is_refused_before_the_cluster_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sched.yaml"
    config.write_text(
        "profiles: [{schedulerName: a, plugins: {filter: {enabled: [{name: Nope}]}}}]"
    )
    code, err = _up(capsys, "--kubeconfig", str(_kubeconfig(tmp_path)), "--config", str(config))
    assert code == 2
    assert err.startswith(f"error: --config {config}: ") and "Nope" in err


def test_several_kubeconfig_files_in_kubeconfig_need_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/a:{tmp_path}/b")
    code, err = _up(capsys)
    assert code == 2
    assert "name one with --kubeconfig" in err


def test_a_state_dir_in_use_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second `up` on the same state dir would overwrite the first one's certificates:
    refused, naming the holder (the rights check is skipped here: the cluster is fake)."""
    from splitsched.up import cluster

    monkeypatch.setattr(cluster, "connect", lambda *_: cluster.Cluster(None, "https://k", "c"))
    monkeypatch.setattr(cluster, "who_am_i", lambda _: "me")
    monkeypatch.setattr(cluster, "missing", lambda *_: [])
    state = tmp_path / "state"
    state.mkdir()
    with (state / "lock").open("w") as held:
        held.write("4242\n")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX)
        code, err = _up(capsys, "--kubeconfig", str(_kubeconfig(tmp_path)),
                        "--state-dir", str(state))  # fmt: skip
    assert code == 2
    assert (
        err
        == f"error: another splitsched up (pid 4242) uses {state}; stop it or give --state-dir\n"
    )


def test_a_config_s_fields_that_do_not_apply_are_noted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sched.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "parallelism: 4\nprofiles: [{schedulerName: a}]\n"
    )
    missing = tmp_path / "nope.yaml"
    code, err = _up(capsys, "--kubeconfig", str(missing), "--config", str(config))
    assert code == 2
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and notes[0].startswith(f"note: --config {config}: parallelism: ")
