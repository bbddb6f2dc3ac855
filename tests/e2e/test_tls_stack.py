"""The whole pipeline over mutual TLS on the real control plane, as the stack runs by
default (what the demo and the other e2e tests get): `Stack` makes a CA and one
certificate per component at start, requires client certificates on every server and
guards the restricted RPCs with `--trusted-clients`. 50 pods get bound (checked from the
API server's objects: every pod bound, no node over allocatable, one Scheduled event per
pod), the CLI reads them with the `ops` certificate, an identity the scheduler does not
trust is refused Simulate but may list pods, plaintext is refused everywhere; each
server refuses its restricted RPCs to every identity but its peer's (the binders serve
only the scheduler, the watcher only the scheduler, the scheduler's outcome reports only
the binders); and no service log holds a key, a certificate or the ServiceAccount tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kubernetes import client

from splitsched.testing import controlplane, invariants, kube, stack
from splitsched.v1 import (
    binder_pb2,
    binder_pb2_grpc,
    scheduler_pb2,
    scheduler_pb2_grpc,
    watcher_pb2,
    watcher_pb2_grpc,
)
from tests.support import stacks

pytestmark = pytest.mark.e2e

PODS = 50


@pytest.fixture(scope="module")
def tls_stack(
    kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stack.Stack]:
    workdir = tmp_path_factory.mktemp("tls-stack")
    with stacks.own_stack(kube_api, workdir, name="tls") as running:
        yield running


@pytest.fixture(scope="module")
def tls_dir(tls_stack: stack.Stack) -> Path:
    """Where the stack made its CA and certificates (the default: in its work dir)."""
    assert tls_stack.tls_dir == tls_stack.workdir / "tls"
    assert (tls_stack.tls_dir / "ca.crt").is_file()
    return tls_stack.tls_dir


def cli(
    server: str, tls_dir: Path, *args: str, who: str | None
) -> subprocess.CompletedProcess[str]:
    """`python -m splitsched.cli ARGS --server S --ca ca.crt [--cert who.crt --key who.key]`."""
    creds = ["--ca", str(tls_dir / "ca.crt")]
    if who is not None:
        creds += ["--cert", str(tls_dir / f"{who}.crt"), "--key", str(tls_dir / f"{who}.key")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPLITSCHED_")}
    return subprocess.run(
        [sys.executable, "-m", "splitsched.cli", *args, "--server", server, *creds],
        capture_output=True,
        text=True,
        env=env,
        cwd=controlplane.REPO_ROOT,
        timeout=60,
    )


def plaintext_health(target: str) -> grpc.StatusCode:
    with grpc.insecure_channel(target) as channel:
        try:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def test_fifty_pods_bound_over_mutual_tls_and_the_cli_reads_them(
    tls_stack: stack.Stack, kube_api: client.ApiClient, namespace: str, tls_dir: Path
) -> None:
    kube.create_pods(kube_api, namespace=namespace, pods=kube.make_pods(PODS, cpu="200m"))

    def all_bound() -> list[str] | None:
        _, pods = invariants.cluster_state(kube_api)
        mine = [p for p in pods if p.namespace == namespace]
        return (
            [p.name for p in mine] if len(mine) == PODS and all(p.node_name for p in mine) else None
        )

    kube.wait_for(all_bound, timeout=60, interval=0.5, message=f"{PODS} pods bound")
    nodes, pods = invariants.cluster_state(kube_api)
    assert invariants.overcommitted(nodes, pods) == []
    events = invariants.list_json(kube_api, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    assert invariants.scheduled_more_than_once(events) == []

    server = tls_stack.scheduler.grpc_target

    def cli_sees_all_bound() -> bool:
        listed = cli(server, tls_dir, "pods", "-n", namespace, "-o", "json", who="ops")
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)["pods"]
        return len(rows) == PODS and {r["state"] for r in rows} == {"BOUND"}

    kube.wait_for(cli_sees_all_bound, timeout=30, interval=1.0, message="CLI: all BOUND")

    # Simulate is restricted: ops is trusted, the watcher's identity is not (but may read).
    manifest = tls_dir / "sim.yaml"
    manifest.write_text(yaml.safe_dump(kube.make_pod("what-if", cpu="100m")))
    ok = cli(server, tls_dir, "simulate", "-f", str(manifest), who="ops")
    assert ok.returncode == 0, ok.stderr
    denied = cli(server, tls_dir, "simulate", "-f", str(manifest), who="watcher")
    assert denied.returncode != 0
    assert "PERMISSION_DENIED" in denied.stderr and "splitsched-watcher" in denied.stderr
    assert "/splitsched.v1.Scheduler/Simulate" in denied.stderr
    reads = cli(server, tls_dir, "pods", "-n", namespace, "-o", "json", who="watcher")
    assert reads.returncode == 0, reads.stderr
    # Without a client certificate the handshake itself fails.
    anonymous = cli(server, tls_dir, "pods", "-n", namespace, who=None)
    assert anonymous.returncode != 0

    for svc in tls_stack.services:
        assert plaintext_health(svc.grpc_target) == grpc.StatusCode.UNAVAILABLE, svc.name
    # The binders' reports reached the scheduler (its only TLS-and-identity-guarded writer).
    for binder in tls_stack.binder_services:
        assert "\nsplitsched_binder_report_backlog 0.0" in binder.metrics()
    assert (
        "denied /splitsched.v1.Scheduler/ReportBindingOutcome"
        not in tls_stack.scheduler.log_tail(10_000)
    )


Rpc = Callable[[grpc.Channel], object]


def _restricted_rpcs(tls_stack: stack.Stack) -> list[tuple[str, str, Rpc, tuple[str, ...]]]:
    """(server, RPC, a call with an empty request, identities it must refuse): every RPC a
    binder serves, the watcher's stream and the scheduler's outcome reports."""

    def binder(ch: grpc.Channel) -> binder_pb2_grpc.BinderStub:
        return binder_pb2_grpc.BinderStub(ch)

    def events(ch: grpc.Channel) -> object:
        request = watcher_pb2.StreamClusterEventsRequest()
        return next(iter(watcher_pb2_grpc.WatcherStub(ch).StreamClusterEvents(request, timeout=10)))

    def report(ch: grpc.Channel) -> object:
        request = scheduler_pb2.ReportBindingOutcomeRequest()
        return scheduler_pb2_grpc.SchedulerStub(ch).ReportBindingOutcome(request, timeout=10)

    to_binder = tls_stack.binder_services[0].grpc_target
    not_scheduler = ("ops", "watcher", "binder")
    return [
        (to_binder, "Bind", lambda ch: binder(ch).Bind(binder_pb2.BindRequest(), timeout=10),
         not_scheduler),
        (to_binder, "BindBatch",
         lambda ch: binder(ch).BindBatch(binder_pb2.BindBatchRequest(), timeout=10),
         not_scheduler),
        (to_binder, "Preempt",
         lambda ch: binder(ch).Preempt(binder_pb2.PreemptRequest(), timeout=10), not_scheduler),
        (to_binder, "ReportUnschedulable",
         lambda ch: binder(ch).ReportUnschedulable(binder_pb2.UnschedulableReport(), timeout=10),
         not_scheduler),
        (tls_stack.watcher.grpc_target, "StreamClusterEvents", events, ("ops", "binder")),
        (tls_stack.scheduler.grpc_target, "ReportBindingOutcome", report,
         ("watcher", "scheduler", "ops")),  # ops is trusted for Simulate only
    ]  # fmt: skip


def test_each_server_refuses_its_restricted_rpcs_to_all_but_its_peer(
    tls_stack: stack.Stack,
) -> None:
    """A valid certificate is not enough: only the right identity may bind, evict, stream
    the cluster or report outcomes (the stack's TRUSTED_CLIENTS)."""
    for target, rpc, call, refused in _restricted_rpcs(tls_stack):
        for who in refused:
            with tls_stack.channel(target, who=who) as channel, pytest.raises(grpc.RpcError) as err:
                call(channel)
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED, (rpc, who)
            assert f"splitsched-{who}" in str(err.value.details()), (rpc, who)


def test_no_keys_certificates_or_tokens_in_the_logs(tls_stack: stack.Stack, tls_dir: Path) -> None:
    """Keys and certificates appear only as paths; kubeconfig bearer tokens never."""
    secrets = [
        str(yaml.safe_load(Path(p).read_text())["users"][0]["user"]["token"])
        for p in (tls_stack.watcher_kubeconfig, tls_stack.binder_kubeconfig)
    ]
    key_lines = [line for f in tls_dir.glob("*.key") for line in f.read_text().splitlines()[1:-1]]
    assert secrets and key_lines
    for svc_log in tls_stack.workdir.glob("*.log"):
        text = svc_log.read_text(errors="replace")
        assert text, svc_log.name
        assert "BEGIN" not in text, svc_log.name
        assert "bearer" not in text.lower(), svc_log.name
        for secret in [*secrets, *key_lines]:
            assert secret not in text, svc_log.name
