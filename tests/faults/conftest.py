"""The fault tier: the three services as real processes on the real control plane, with
processes killed, the API server restarted and a fault-injecting proxy in front of the API
server (``splitsched.testing.faultproxy``).

Fixtures and hooks here; the classes and constants the tests import live in
``tests/support/faults.py``:

* ``fault_nodes`` (package: deleted after the tier, so later tiers never see them): 30
  kwok nodes of 4 CPUs labelled ``faults=<run id>``; every
  test's pods select them, and the scheduler bin-packs (MostAllocated), so nodes fill to
  exactly their allocatable and any accounting slip shows up as an overcommitted node;
* ``component_configs`` (package): the watcher's and the binders' least-privilege
  ServiceAccount kubeconfigs (bearer tokens, so they pass through the proxy);
* ``faults_env``: builds ``FaultStack``s (a ``Stack`` whose services can be ``kill -9``-ed
  and restarted on the same ports) and ``FaultProxy``s, and stops them all after the test;
* ``create_workload``, ``wait_all_bound`` and ``check_invariants``: every test ends with
  the two promises checked from the API server's objects (no node over allocatable, every
  pod bound) and no pod with two Bindings accepted (the proxies' logs of 201s);
* a results table printed at the end of the session (``docs/faults.md`` is made from it).

Long variants run only with ``SPLITSCHED_LONG_FAULTS=1``; skipped ones say why.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from splitsched.testing import kube, stack
from tests.support.faults import (
    BIN_PACKING_PROFILE,
    LONG,
    LONG_REASON,
    NODE_COUNT,
    NODE_CPU_MILLI,
    RESULTS,
    FaultNodes,
    FaultsEnv,
)

RESTART_TEST_PREFIX = "tests/faults/test_apiserver_restart.py"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: kills, restarts and injected API faults")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The API server restart runs last in the session: should the server fail to come
    back on its port, no other test depends on it any more."""
    last = {id(i) for i in items if i.nodeid.startswith(RESTART_TEST_PREFIX)}
    if last:
        items[:] = [i for i in items if id(i) not in last] + [i for i in items if id(i) in last]


# -- results table -------------------------------------------------------------------------


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("faults: pods lost and double-booked under each fault")
    tr.write_line(
        "lost = pods never bound; dbl = pods with more than one Binding accepted (the proxy's "
        "log of 201s); over = nodes whose bound pods exceed allocatable"
    )
    tr.write_line(
        f"{'fault':76s} {'pods':>5s} {'lost':>5s} {'dbl':>4s} {'over':>4s} {'secs':>5s}  injected"
    )
    for r in RESULTS:
        injected = ", ".join(f"{k}={v}" for k, v in sorted(r.injected.items())) or "-"
        tr.write_line(
            f"{r.fault[:76]:76s} {r.pods:5d} {r.lost:5d} {r.double_booked:4d} "
            f"{r.overcommitted_nodes:4d} {r.seconds:5.0f}  {injected}"
        )
    if not LONG:
        tr.write_line(f"(long variants skipped: {LONG_REASON})")
    if path := os.environ.get("SPLITSCHED_FAULTS_REPORT"):
        Path(path).write_text("\n".join(json.dumps(r.__dict__) for r in RESULTS) + "\n")


# -- session fixtures ----------------------------------------------------------------------


@pytest.fixture(scope="package")
def fault_nodes(kube_api: client.ApiClient) -> Iterator[FaultNodes]:
    label = uuid.uuid4().hex[:6]
    names = kube.create_kwok_nodes(
        kube_api, NODE_COUNT, name_prefix=f"faults-{label}", cpu=str(NODE_CPU_MILLI // 1000),
        memory="16Gi", pods=110, labels={"faults": label}, workers=16,
    )  # fmt: skip
    try:
        yield FaultNodes(label, names)
    finally:
        kube.delete_nodes(kube_api, names)


@pytest.fixture(scope="package")
def component_configs(
    kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Path]]:
    directory = tmp_path_factory.mktemp("fault-sa")
    sa_namespace = kube.create_namespace(kube_api, prefix="splitsched-faults")
    try:
        yield stack.component_kubeconfigs(kube_api, namespace=sa_namespace, directory=directory)
    finally:
        kube.delete_namespace(kube_api, sa_namespace)


@pytest.fixture(scope="package")
def profiles_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fault-profiles") / "bin-packing.yaml"
    path.write_text(yaml.safe_dump(BIN_PACKING_PROFILE))
    return path


@pytest.fixture
def faults_env(
    kube_api: client.ApiClient,
    namespace: str,
    fault_nodes: FaultNodes,
    component_configs: dict[str, Path],
    profiles_file: Path,
    tmp_path: Path,
) -> Iterator[FaultsEnv]:
    env = FaultsEnv(
        api=kube_api,
        namespace=namespace,
        nodes=fault_nodes,
        configs=component_configs,
        profiles=profiles_file,
        workdir=tmp_path,
    )
    try:
        yield env
    finally:
        tracebacks = [s.tracebacks() for s in env.stacks]
        env.close()
        for text in tracebacks:
            if text:
                print(text)
