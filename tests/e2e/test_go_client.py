"""Other languages can use the Scheduler API: `examples/go-client`, a Go module with stubs
generated from our proto, is built and run against the running scheduler, listing its
nodes (ListNodes) and explaining a pending pod (Explain), over mutual TLS with the stack's
`ops` certificate (its -ca/-cert/-key, here from SPLITSCHED_CA/_CERT/_KEY). Also checks
that the committed Go stubs are exactly what `examples/go-client/generate.sh` makes from
the proto today.

Needs the Go toolchain: without it these tests fail (they do not skip). The first run on
a machine downloads grpc-go and the two protoc plugins into the Go caches; later runs reuse
them.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from kubernetes import client

from splitsched.testing import controlplane, kube, stack
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

pytestmark = pytest.mark.e2e

GO_CLIENT = controlplane.REPO_ROOT / "examples" / "go-client"
GENERATED = Path("gen") / "splitschedv1"


def go_tool() -> str:
    found = shutil.which("go")
    if found is None and Path("/usr/local/go/bin/go").exists():
        found = "/usr/local/go/bin/go"
    if found is None:
        pytest.fail(
            "the Go toolchain is missing: `go` is not on PATH (nor /usr/local/go/bin). "
            "examples/go-client needs Go >= 1.25 to build (https://go.dev/dl/).",
            pytrace=False,
        )
    return found


def run(
    argv: list[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local", **(env or {})}
    return subprocess.run(
        argv, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_committed_go_stubs_match_the_proto(tmp_path: Path) -> None:
    go = go_tool()
    proc = subprocess.run(
        ["bash", str(GO_CLIENT / "generate.sh"), str(tmp_path)],
        env={**os.environ, "GO": go, "PY": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    fresh, committed = tmp_path / GENERATED, GO_CLIENT / GENERATED
    names = sorted(p.name for p in fresh.iterdir())
    assert names == ["scheduler.pb.go", "scheduler_grpc.pb.go", "types.pb.go"]
    assert names == sorted(p.name for p in committed.iterdir())
    _, mismatch, errors = filecmp.cmpfiles(fresh, committed, names, shallow=False)
    assert not mismatch and not errors, (
        f"stale Go stubs {mismatch + errors}: run bash examples/go-client/generate.sh"
    )


@pytest.fixture(scope="module")
def go_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = go_tool()
    binary = tmp_path_factory.mktemp("go") / "go-client"
    proc = run([go, "build", "-o", str(binary), "."], cwd=GO_CLIENT, timeout=900)
    assert proc.returncode == 0, f"go build failed:\n{proc.stderr}"
    return binary


def test_go_client_lists_nodes_and_explains_a_pending_pod(
    go_client: Path,
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
) -> None:
    target = running_stack.scheduler.grpc_target
    kube.create_pods(kube_api, namespace=namespace, pods=[kube.make_pod("stuck", cpu="100")])
    with running_stack.channel() as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)

        def waiting() -> bool:
            try:
                status = stub.GetPod(
                    scheduler_pb2.GetPodRequest(namespace=namespace, name="stuck"), timeout=5
                )
            except grpc.RpcError:
                return False
            return status.state == scheduler_pb2.WAITING and status.scheduling_attempts > 0

        kube.wait_for(waiting, timeout=30, message="the pod to be tried and wait")
        node_names = {n.name for n in stub.ListNodes(scheduler_pb2.ListNodesRequest()).nodes}

    proc = run(
        [str(go_client), "-server", target, "-pod", f"{namespace}/stuck"],
        cwd=GO_CLIENT,
        timeout=60,
        env=running_stack.cli_env(),
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    listed = {line.split()[0] for line in out.splitlines()[1 : len(node_names) + 1]}
    assert listed == node_names
    assert f"{len(node_names)} nodes" in out
    gpu_line = next(line for line in out.splitlines() if "-gpu-zone-a-" in line)
    assert "16000" in gpu_line and "nvidia.com/gpu=true:NoSchedule" in gpu_line
    assert f"pod {namespace}/stuck: WAITING" in out
    assert f"0/{len(node_names)} nodes are available" in out
    assert "NodeResourcesFit" in out and "Insufficient cpu" in out
    assert "TaintToleration" in out and "preemption might help: false" in out
    # Errors keep the CLI's exit codes: not found is 4.
    proc = run(
        [str(go_client), "-server", target, "-pod", f"{namespace}/ghost"],
        cwd=GO_CLIENT,
        timeout=60,
        env=running_stack.cli_env(),
    )
    assert proc.returncode == 4 and "not found" in proc.stderr
