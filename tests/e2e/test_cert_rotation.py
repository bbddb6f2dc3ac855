"""Certificate rotation under load with no restart (issue 22). The three services (two
binders) run mutual TLS as the chart installs them; pods are created without pause, and
mid-run every certificate is re-issued from a new CA as an operator rotates them
(`certs.rotate_stack`: the CA bundle trusts old and new, new leaf certificates, then only
the new CA). After each step every server presents the current certificate (read with
`ssl`) and pods created after the step get bound; pods keep binding while the binders'
connections are renewed (so over handshakes with the new certificates only). At the end:
every pod is bound (nothing lost, no node over allocatable, one Scheduled event per pod);
the services are the same processes; each reloaded its files and the clients made new
channels; the expiry gauge shows the new certificates; no TLS handshake failed and no RPC
failed for longer than one retry (the binders' reports, the scheduler's batches to the
binders, its watch and its health checks of the binders).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from splitsched.testing import invariants, kube, stack
from tests.support import certs, stacks

pytestmark = pytest.mark.e2e

BATCH = 2  # pods per creation round
PERIOD = 0.5  # seconds between rounds: 4 pods/s while the certificates change
MAX_PODS = 400  # 4 nodes x 110 pods; the feeder stops there
FLOW = 10  # pods created after a step that must bind before the next step
#: A binder's connections last at most this long (services.binder.main's
#: max_connection_age_s, 30, and its grace, 10): after it, every connection the scheduler
#: has to the binders was opened with the new certificates.
BINDER_CONNECTION_AGE = 40.0
GAUGE = "splitsched_tls_certificate_expiry_seconds"


@pytest.fixture(scope="module")
def rotating_stack(
    kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stack.Stack]:
    """Its own stack: the test rewrites its certificates."""
    workdir = tmp_path_factory.mktemp("rotation-stack")
    with stacks.own_stack(kube_api, workdir, name="rot", cpu="32", memory="64Gi") as running:
        yield running


class Feeder:
    """Creates BATCH pods every PERIOD seconds in a thread until stopped (or MAX_PODS)."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.created = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="pod-feeder", daemon=True)

    def _run(self) -> None:
        batch = 0
        while not self.stop.wait(PERIOD) and self.created < MAX_PODS:
            pods = kube.make_pods(BATCH, name_prefix=f"rot-{batch}", cpu="10m", memory="8Mi")
            kube.create_pods(self.api, namespace=self.namespace, pods=pods)
            self.created += len(pods)
            batch += 1

    def __enter__(self) -> Feeder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def bound(api: client.ApiClient, namespace: str) -> tuple[int, int]:
    """(pods in `namespace`, of them bound)."""
    _, pods = invariants.cluster_state(api)
    mine = [p for p in pods if p.namespace == namespace]
    return len(mine), sum(1 for p in mine if p.node_name)


def wait_bound(api: client.ApiClient, namespace: str, at_least: int, what: str) -> None:
    kube.wait_for(
        lambda: bound(api, namespace)[1] >= at_least, timeout=60, interval=0.2, message=what
    )


def gauge(text: str, role: str) -> float:
    match = re.search(rf'^{GAUGE}{{role="{role}"}} (\S+)$', text, re.MULTILINE)
    assert match, f"no {GAUGE}{{role={role}}}"
    return float(match.group(1))


def test_every_certificate_rotated_while_pods_flow_without_a_restart(
    rotating_stack: stack.Stack, kube_api: client.ApiClient, namespace: str
) -> None:
    s = rotating_stack
    d = s.tls_dir
    assert d is not None
    pids = {svc.name: svc.proc.pid for svc in s.services if svc.proc is not None}
    servers = {svc.name: svc for svc in s.services}
    old = {c: certs.load(d, c) for c in ("ca", "watcher", "scheduler", "binder")}
    # What the services log from the rotation on (their start has its own reconnects).
    marks = {svc.name: svc.log_path.stat().st_size for svc in s.services}

    def serves(step: str, new: dict[str, certs.Issued]) -> None:
        for name, svc in servers.items():
            component = name.partition("-")[0]
            expected = new.get(component, old[component]).cert.serial_number
            assert certs.presented_serial(svc.grpc_port, d) == expected, (step, name)

    with Feeder(kube_api, namespace) as feeder:
        wait_bound(kube_api, namespace, FLOW, "pods bound before the rotation")
        for step, new in certs.rotate_stack(d, old["ca"]):
            serves(step, new)
            wait_bound(kube_api, namespace, feeder.created + FLOW, f"pods bound after {step}")
        time.sleep(BINDER_CONNECTION_AGE)  # pods keep coming while connections are renewed
        wait_bound(kube_api, namespace, feeder.created + FLOW, "pods bound on new connections")
    created = feeder.created
    kube.wait_for(lambda: bound(kube_api, namespace) == (created, created), timeout=90,
                  interval=0.5, message=f"all {created} pods bound")  # fmt: skip

    nodes, pods = invariants.cluster_state(kube_api)
    assert invariants.overcommitted(nodes, pods) == []
    events = invariants.list_json(kube_api, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    assert invariants.scheduled_more_than_once(events) == []

    # The same processes, each on its new certificate (the gauge follows).
    for svc in s.services:
        assert svc.alive() and svc.proc is not None and svc.proc.pid == pids[svc.name]
        component = svc.name.partition("-")[0]
        end = new[component].cert.not_valid_after_utc.timestamp()
        metrics = svc.metrics()
        assert gauge(metrics, "server") == end, svc.name
        if component != "watcher":  # the watcher dials no peer
            assert gauge(metrics, "client") == end, svc.name
    logs = {
        svc.name: svc.log_path.read_bytes()[marks[svc.name] :].decode(errors="replace")
        for svc in s.services
    }
    assert_no_failure_longer_than_a_retry(logs)


def assert_no_failure_longer_than_a_retry(logs: dict[str, str]) -> None:
    """From what the services logged since the rotation began: every server took its new
    files and every client made a new channel; no TLS handshake failed; a binder's outcome
    report never failed twice in a row; the scheduler never had a batch refused, lost its
    watch of the watcher or found no binder SERVING."""
    for name, text in logs.items():
        assert "Handshake failed" not in text, name
        assert "TLS server files" in text and "reloaded" in text, name
        if name != "watcher":
            assert "TLS files changed: new channel to" in text, name
        for failures in re.findall(r"reachable again after (\d+) failed deliveries", text):
            assert int(failures) <= 1, (name, failures)
    scheduler = logs["scheduler"]
    assert "BindBatch failed" not in scheduler
    assert "watcher stream ended" not in scheduler
    assert "no binder SERVING" not in scheduler
