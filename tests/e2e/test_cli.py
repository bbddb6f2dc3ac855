"""The `splitsched` CLI against the three services on the real control plane: every verb
(`pods`, `explain`, `simulate -f`, `nodes`, `watch`, `trace`) run as a subprocess, its output
(aligned tables, colour only on a terminal, json, yaml) and its exit codes (0 ok,
1 negative answer, 2 bad input, 3 unreachable, 4 not found).

Waiting for pods to settle uses the gRPC API directly; only the verbs under test go
through the CLI. Both use the stack's `ops` client certificate (the stack is mutual TLS).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import yaml
from kubernetes import client

from splitsched.testing import controlplane, kube, stack
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

pytestmark = pytest.mark.e2e

ANSI = "\x1b["


@dataclass(frozen=True)
class Server:
    """The scheduler's address and the environment that gives the CLI its client
    certificate (SPLITSCHED_CA, _CERT, _KEY; empty in plaintext)."""

    address: str
    env: Mapping[str, str]


@pytest.fixture(scope="module")
def server(running_stack: stack.Stack) -> Server:
    return Server(running_stack.scheduler.grpc_target, running_stack.cli_env())


@pytest.fixture(scope="module")
def stub(running_stack: stack.Stack) -> Iterator[scheduler_pb2_grpc.SchedulerStub]:
    with running_stack.channel() as channel:
        yield scheduler_pb2_grpc.SchedulerStub(channel)


def cli(
    server: Server | None,
    *args: str,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m splitsched.cli ARGS` with SPLITSCHED_SERVER and the TLS files of
    `server` (unless None)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITSCHED_")}
    full_env.pop("NO_COLOR", None)
    if server is not None:
        full_env.update({"SPLITSCHED_SERVER": server.address, **server.env})
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "splitsched.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        cwd=controlplane.REPO_ROOT,
        timeout=60,
    )


def wait_state(stub: scheduler_pb2_grpc.SchedulerStub, ns: str, name: str, state: int) -> None:
    def reached() -> bool:
        try:
            status = stub.GetPod(scheduler_pb2.GetPodRequest(namespace=ns, name=name), timeout=5)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return False
            raise
        return status.state == state and status.scheduling_attempts > 0

    kube.wait_for(reached, timeout=30, message=f"{ns}/{name} in state {state}")


@pytest.fixture
def settled(
    kube_api: client.ApiClient, namespace: str, stub: scheduler_pb2_grpc.SchedulerStub
) -> str:
    """Two pods bound and one that fits nowhere, in the test's namespace."""
    pods = [kube.make_pod("fit-0"), kube.make_pod("fit-1"), kube.make_pod("unfit", cpu="100")]
    kube.create_pods(kube_api, namespace=namespace, pods=pods)
    for name in ("fit-0", "fit-1"):
        wait_state(stub, namespace, name, scheduler_pb2.BOUND)
    wait_state(stub, namespace, "unfit", scheduler_pb2.WAITING)
    return namespace


def test_pods_table_json_yaml_and_one_pod(server: Server, settled: str) -> None:
    ns = settled
    out = cli(server, "pods", "-n", ns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = lines[0]
    assert header.split() == ["POD", "STATE", "NODE", "ATTEMPTS", "MESSAGE"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {f"{ns}/fit-0", f"{ns}/fit-1", f"{ns}/unfit"}
    assert ANSI not in out.stdout  # not a terminal
    for pod, state in (("fit-0", "BOUND"), ("fit-1", "BOUND"), ("unfit", "WAITING")):
        line = rows[f"{ns}/{pod}"]
        assert line.index(state) == header.index("STATE")  # aligned
        assert line.split()[1] == state
    assert "Insufficient cpu" in rows[f"{ns}/unfit"]
    # --pending -o json: only the unfit pod.
    out = cli(server, "pods", "--pending", "-n", ns, "-o", "json")
    assert out.returncode == 0, out.stderr
    pending = json.loads(out.stdout)["pods"]
    assert [(p["pod"]["name"], p["state"]) for p in pending] == [("unfit", "WAITING")]
    # -o yaml, everything in the namespace.
    out = cli(server, "pods", "-n", ns, "-o", "yaml")
    doc = yaml.safe_load(out.stdout)
    assert sorted(p["pod"]["name"] for p in doc["pods"]) == ["fit-0", "fit-1", "unfit"]
    assert {p["state"] for p in doc["pods"] if p["pod"]["name"].startswith("fit")} == {"BOUND"}
    # One pod in detail (GetPod), and a pod nobody tracks.
    out = cli(server, "pods", f"{ns}/unfit")
    assert out.returncode == 0, out.stderr
    assert "state:               WAITING" in out.stdout
    assert "WHY NOT (LAST ATTEMPT)" in out.stdout and "Insufficient cpu" in out.stdout
    out = cli(server, "pods", f"{ns}/nope")
    assert out.returncode == 4 and f"{ns}/nope" in out.stderr


def test_explain_exit_codes_and_output(server: Server, settled: str) -> None:
    ns = settled
    out = cli(server, "explain", f"{ns}/unfit", "--nodes")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"pod {ns}/unfit: WAITING" in text and "Insufficient cpu" in text
    assert "PLUGIN" in text and "NodeResourcesFit" in text and "TaintToleration" in text
    assert "preemption might help: no" in text
    assert "REJECTED BY" in text  # --nodes: every node's verdict
    out = cli(server, "explain", f"{ns}/unfit", "-o", "json")
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert doc["total_nodes"] > 0 and doc["feasible_nodes"] == 0  # zero values printed too
    assert doc["preemption_might_help"] is False
    assert {v["plugin"] for v in doc["plugins"]} >= {"NodeResourcesFit", "TaintToleration"}
    # Not pending: a negative answer. Unknown: not found. Malformed reference: bad input.
    out = cli(server, "explain", f"{ns}/fit-0")
    assert out.returncode == 1 and "not pending: bound to node" in out.stdout
    assert cli(server, "explain", f"{ns}/ghost").returncode == 4
    out = cli(server, "explain", "a/b/c")
    assert out.returncode == 2 and "NAMESPACE/NAME" in out.stderr


def test_simulate_files_and_stdin(server: Server, tmp_path: Path) -> None:
    fits = kube.make_pod("probe", cpu="100m")
    (tmp_path / "fits.yaml").write_text(yaml.safe_dump(fits))
    out = cli(server, "simulate", "-f", str(tmp_path / "fits.yaml"), "-o", "json")
    assert out.returncode == 0, out.stderr
    placement = json.loads(out.stdout)["placements"][0]
    assert placement["pod"]["name"] == "probe" and placement["node"].startswith("e2e-")
    assert len(placement["top_nodes"]) == 3
    # Doesn't fit: exit 1, the table says why per plugin.
    too_big = kube.make_pod("too-big", cpu="100")
    out = cli(server, "simulate", "-f", "-", stdin=json.dumps(too_big))
    assert out.returncode == 1, out.stderr
    assert "default/too-big" in out.stdout and "Insufficient cpu" in out.stdout
    assert "why default/too-big fits nowhere" in out.stdout
    # A gang with one member that cannot fit: nothing placed.
    (tmp_path / "big.json").write_text(json.dumps(too_big))
    out = cli(
        server,
        "simulate",
        "--gang",
        "-f",
        str(tmp_path / "fits.yaml"),
        "-f",
        str(tmp_path / "big.json"),
        "-o",
        "json",
    )
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert [p["node"] for p in doc["placements"]] == ["", ""] and doc["all_placed"] is False
    assert doc["blocking_pod"]["name"] == "too-big"
    # Malformed: exit 2, naming the manifest, the pod and the field.
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(kube.make_pod("x", cpu="abc")))
    out = cli(server, "simulate", "-f", str(tmp_path / "bad.yaml"))
    assert out.returncode == 2
    assert (
        "manifests[0]: pod default/x: spec.containers[0].resources.requests.cpu: "
        "invalid quantity 'abc'" in out.stderr
    )
    out = cli(server, "simulate", "-f", str(tmp_path / "missing.yaml"))
    assert out.returncode == 2 and "missing.yaml" in out.stderr


def test_nodes_table_and_json(server: Server, kube_api: client.ApiClient) -> None:
    out = cli(server, "nodes", "-o", "json")
    assert out.returncode == 0, out.stderr
    names = {n["name"] for n in json.loads(out.stdout)["nodes"]}
    api_names = {n.metadata.name for n in client.CoreV1Api(kube_api).list_node().items}
    assert names == api_names
    out = cli(server, "nodes", "--prefix", "e2e-")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NODE", "PODS", "CPU", "MEMORY", "OTHER", "TAINTS"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {n for n in api_names if n.startswith("e2e-")}
    gpu = next(line for name, line in rows.items() if "-gpu-" in name)
    assert "nvidia.com/gpu=true:NoSchedule" in gpu and "nvidia.com/gpu 0/4 (0%)" in gpu
    large = next(line for name, line in rows.items() if "-large-" in name)
    assert "/16 (" in large and "/64Gi (" in large
    cpu_column = lines[0].index("CPU")
    assert all(line[cpu_column - 2 : cpu_column] == "  " for line in lines[1:])  # aligned
    assert all(line[cpu_column] != " " for line in lines[1:])


def test_watch_replays_and_stops_after_count(
    server: Server,
    kube_api: client.ApiClient,
    namespace: str,
    stub: scheduler_pb2_grpc.SchedulerStub,
) -> None:
    kube.create_pods(kube_api, namespace=namespace, pods=[kube.make_pod("watched")])
    wait_state(stub, namespace, "watched", scheduler_pb2.BOUND)
    out = cli(server, "watch", "-n", namespace, "--recent", "10", "--count", "2", "-o", "json")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(e["pod"]["name"], e["kind"]) for e in events] == [
        ("watched", "SCHEDULED"),
        ("watched", "BOUND"),
    ]
    node = kube.get_pod(kube_api, namespace=namespace, name="watched").spec.node_name
    assert {e["node"] for e in events} == {node}
    out = cli(server, "watch", "-n", namespace, "--recent", "1", "--count", "1")
    assert out.returncode == 0, out.stderr
    assert "BOUND" in out.stdout and f"{namespace}/watched" in out.stdout and node in out.stdout


def test_unreachable_server_exits_3(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{controlplane.free_port()}"
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(kube.make_pod("p")))
    for args in (("nodes",), ("explain", "ns/p"), ("simulate", "-f", str(tmp_path / "p.yaml"))):
        out = cli(None, *args, "--server", dead, "--timeout", "5")
        assert out.returncode == 3, (args, out.stderr)
        assert f"scheduler at {dead}: UNAVAILABLE" in out.stderr
    # The environment names the server when --server is not given.
    out = cli(Server(dead, {}), "pods", "--timeout", "5")
    assert out.returncode == 3 and dead in out.stderr


def run_on_terminal(server: Server, *args: str, env: Mapping[str, str] | None = None) -> str:
    """Run the CLI with stdout on a pseudo-terminal; return what it printed."""
    master, slave = pty.openpty()
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full_env.update({"SPLITSCHED_SERVER": server.address, **server.env, **(env or {})})
    proc = subprocess.Popen(
        [sys.executable, "-m", "splitsched.cli", *args],
        stdout=slave,
        stderr=subprocess.DEVNULL,
        env=full_env,
        cwd=controlplane.REPO_ROOT,
    )
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        proc.wait(timeout=60)
    assert proc.returncode == 0
    return b"".join(chunks).decode()


def test_tables_are_coloured_only_on_a_terminal(server: Server, settled: str) -> None:
    on_terminal = run_on_terminal(server, "pods", "-n", settled)
    assert "\x1b[32mBOUND" in on_terminal and "\x1b[33mWAITING" in on_terminal
    assert ANSI not in run_on_terminal(server, "pods", "-n", settled, env={"NO_COLOR": "1"})
    piped = cli(server, "pods", "-n", settled)
    assert ANSI not in piped.stdout and "BOUND" in piped.stdout


def test_trace_shows_a_pods_last_attempts_from_the_schedulers_memory(
    server: Server, settled: str
) -> None:
    ns = settled
    out = cli(server, "trace", f"{ns}/unfit")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"pod {ns}/unfit: last ") and "oldest first" in lines[0]
    assert any(line.startswith("trace ") and "exported: no" in line for line in lines)
    spans = [line.split()[0] for line in lines if line.strip()]
    assert "schedule_pod" in spans and "queue_wait" in spans and "filter" in spans
    root = next(line for line in lines if line.startswith("schedule_pod "))
    assert "ERROR 0/" in root and "Insufficient cpu" in root
    assert any(line.startswith("  filter ") for line in lines)  # a child, indented
    # A bound pod's attempt ends with the watch's confirmation, which may follow the
    # binder's report (BOUND) by a moment; -o json gives the spans.
    kube.wait_for(
        lambda: cli(server, "trace", f"{ns}/fit-0").returncode == 0,
        timeout=30,
        message="fit-0's attempt confirmed",
    )
    out = cli(server, "trace", f"{ns}/fit-0", "-o", "json", "--last", "1")
    assert out.returncode == 0, out.stderr
    (attempt,) = json.loads(out.stdout)["attempts"]
    names = [s["name"] for s in attempt["spans"]]
    assert names[0] == "schedule_pod" and {"bind_request", "confirm"} <= set(names)
    assert attempt["spans"][0]["error"] is False
    out = cli(server, "trace", f"{ns}/ghost")
    assert out.returncode == 4 and f"{ns}/ghost" in out.stderr
