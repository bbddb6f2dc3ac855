"""The control plane's parts that need no binaries: pinned versions and the binary cache,
the components' command lines, kwok's config check, ``state.json``, PID files that do not
trust a reused PID, logs cleared for a fresh start, and ``status`` of a state dir where
nothing runs."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from splitsched.testing.controlplane import binaries, cli, components, processes, state
from splitsched.testing.controlplane.state import ControlPlaneError, ControlPlaneState

STATE = ControlPlaneState(
    etcd_client_port=21001, etcd_peer_port=21002, apiserver_port=21003, kwok_port=21004
)


def test_read_versions_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "versions.env"
    path.write_text("# pinned\n\nKUBERNETES_VERSION = v1.2.3\nnot a pair\nETCD_VERSION=v3\n")
    assert binaries.read_versions(path) == {"KUBERNETES_VERSION": "v1.2.3", "ETCD_VERSION": "v3"}


def test_binaries_live_in_the_cache_by_name_and_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPLITSCHED_CACHE", str(tmp_path))
    version = binaries.binary_versions()["etcd"]
    assert binaries.binary_path("etcd") == tmp_path / "bin" / f"etcd-{version}" / "etcd"
    assert not binaries.binaries_present(("etcd",))
    binaries.binary_path("etcd").parent.mkdir(parents=True)
    binaries.binary_path("etcd").write_text("")
    assert binaries.binaries_present(("etcd",))
    assert not binaries.binaries_present(("etcd", "kwok"))  # kwok and its stages missing


def test_command_lines_use_the_recorded_ports(tmp_path: Path) -> None:
    etcd = components.etcd_argv(tmp_path / "etcd", STATE, data_dir=tmp_path / "data")
    assert "--listen-client-urls=http://127.0.0.1:21001" in etcd
    assert "--initial-cluster=splitsched=http://127.0.0.1:21002" in etcd
    apiserver = components.apiserver_argv(tmp_path / "kube-apiserver", STATE, pki=tmp_path)
    assert "--secure-port=21003" in apiserver
    assert "--etcd-servers=http://127.0.0.1:21001" in apiserver
    assert f"--client-ca-file={tmp_path / 'ca.crt'}" in apiserver
    assert "--enable-priority-and-fairness=true" in apiserver  # as in real clusters
    assert "--max-requests-inflight=2000" in apiserver
    kwok = components.kwok_argv(
        tmp_path / "kwok", STATE, kubeconfig=tmp_path / "k", config=tmp_path / "c"
    )
    assert "--server-address=127.0.0.1:21004" in kwok
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in kwok
    assert STATE.server_url == "https://127.0.0.1:21003"


def test_small_inflight_limits_reach_the_command_line(tmp_path: Path) -> None:
    small = ControlPlaneState(1, 2, 3, 4, max_requests_inflight=8, max_mutating_requests_inflight=4)
    apiserver = components.apiserver_argv(tmp_path / "kube-apiserver", small, pki=tmp_path)
    assert "--max-requests-inflight=8" in apiserver
    assert "--max-mutating-requests-inflight=4" in apiserver


def test_kwok_config_needs_node_and_pod_stages(tmp_path: Path) -> None:
    node = "kind: Stage\nspec:\n  resourceRef:\n    kind: Node\n"
    pod = "kind: Stage\nspec:\n  resourceRef:\n    kind: Pod\n"
    assert components.kwok_config([node, pod], stages_dir=tmp_path) == f"{node.strip()}\n---\n{pod}"
    with pytest.raises(ControlPlaneError, match="kwok node and pod stages missing"):
        components.kwok_config([node], stages_dir=tmp_path)


def test_state_round_trips_and_a_missing_file_is_none(tmp_path: Path) -> None:
    path = tmp_path / state.STATE_FILE
    assert state.load_state(path) is None
    recorded = ControlPlaneState(1, 2, 3, 4, pids={"etcd": 10}, versions={"etcd": "v3"})
    state.save_state(path, recorded)
    assert state.load_state(path) == recorded
    path.write_text("{not json")
    assert state.load_state(path) is None


def test_a_pid_file_naming_another_program_is_not_trusted(tmp_path: Path) -> None:
    files = processes.ProcessFiles(tmp_path)
    files.pid_path("etcd").write_text(f"{os.getpid()}\n")  # alive, but this is python
    assert files.read_pid("etcd") == os.getpid()
    assert files.running_pid("etcd") is None
    assert files.stop("etcd", timeout=1) is False  # and stopping it kills nothing
    assert not files.pid_path("etcd").exists()
    assert processes.pid_alive(os.getpid())


def test_a_fresh_start_clears_the_logs_and_spawn_appends(tmp_path: Path) -> None:
    files = processes.ProcessFiles(tmp_path)
    (tmp_path / "logs").mkdir()
    files.log_path("etcd").write_text("listening on the previous run's port\n")
    files.clear_logs()
    assert not files.log_path("etcd").exists()
    for _ in range(2):  # a restart (the API server's) keeps what the log said before
        pid = files.spawn("etcd", ["sh", "-c", "echo started"])
        while processes.pid_alive(pid):  # (reaped here, or by subprocess's own cleanup)
            processes.reap(pid)
            time.sleep(0.01)
    assert files.log_path("etcd").read_text() == "started\n" * 2


def test_free_ports_are_below_the_ephemeral_range_and_not_handed_out_twice() -> None:
    ports = [processes.free_port() for _ in range(20)]
    assert len(set(ports)) == 20
    assert all(20000 <= p < 32000 for p in ports)


def test_a_preferred_port_is_taken_when_free_and_passed_over_when_not() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert processes.free_port(preferred=busy) != busy
    assert processes.free_port(preferred=busy) == busy  # free again now
    assert processes.free_port(preferred=busy) != busy  # handed out once only


def test_status_of_an_empty_state_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--state-dir", str(tmp_path)]) == 0
    assert cli.main(["status", "--state-dir", str(tmp_path), "--check"]) == 1
    assert cli.main(["down", "--state-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:6] == [
        f"state dir:  {tmp_path}",
        "  etcd                     stopped",
        "  kube-apiserver           stopped",
        "  kube-controller-manager  stopped",
        "  kwok                     stopped",
        "not running (or not healthy)",
    ]
    assert out[-1] == "nothing was running"
