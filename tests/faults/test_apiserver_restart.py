"""The API server restarted in the middle of a run (same port, same etcd): nothing lost,
nothing double-booked.

While it is down, the watcher's watches break and its re-watches fail (it backs off and
re-watches from its last resourceVersion once the server is back; resourceVersions stay
valid because etcd kept everything), the binders' requests fail with connection errors
(retried with backoff to the bind deadline, then reported; the scheduler requeues), and
readiness follows the API server. The binders talk through a pass-through proxy so its
log can prove no pod got two Bindings accepted.
"""

from __future__ import annotations

import time

import pytest

from tests.support.faults import FaultsEnv
from tests.support.fixtures import ControlPlaneHandle

pytestmark = pytest.mark.faults

PODS = 600
RESTART_AT = 0.3


@pytest.mark.parametrize("graceful", [False], ids=["sigkill"])
def test_apiserver_restart_mid_run(
    faults_env: FaultsEnv,
    control_plane: ControlPlaneHandle,
    graceful: bool,
    request: pytest.FixtureRequest,
) -> None:
    if control_plane.local is None:
        pytest.skip(
            f"the {control_plane.backend} backend's API server cannot be restarted by the "
            "test (only SPLITSCHED_BACKEND=local runs this one)"
        )
    local = control_plane.local
    proxy, binder_config = faults_env.proxy("binder")
    faults_env.stack(binder_kubeconfig=binder_config, binders=2)
    started = time.monotonic()
    # Pods are still being created, scheduled and bound when the server goes away.
    with faults_env.creating_workload(PODS):
        bound_at = faults_env.wait_bound_at_least(int(PODS * RESTART_AT), timeout=180)
        restart_started = time.monotonic()
        local.restart_apiserver(graceful=graceful)
        down_for = time.monotonic() - restart_started
    faults_env.wait_all_bound(PODS, timeout=300)
    faults_env.check_invariants(
        test=request.node.name,
        fault=f"kube-apiserver {'SIGTERM' if graceful else 'SIGKILL'}ed at "
        f"{bound_at} of {PODS} bound, back after {down_for:.0f}s",
        count=PODS,
        started=started,
        binding_proxies=[proxy],
        injected={"apiserver restart": 1},
    )
