"""`splitsched up` against the real control plane, as a user runs it (a subprocess):

* with a kubeconfig whose current context is broken, ``--context`` picks the good one;
  pods with schedulerName splitsched are bound to kwok nodes; the CLI reaches the
  scheduler with the settings `up` wrote; SIGTERM stops every process it started;
* with ``--config``, every profile's pods are scheduled and bound (the binders and the
  watcher serve the profiles' schedulerNames too);
* an identity without binding rights (a ServiceAccount with the watcher's rules) is told
  what is missing and gets RBAC on stdout, with nothing started; once that RBAC is
  applied, the same identity runs `up` and schedules a pod.

Bad kubeconfig paths, contexts and flags: tests/unit/up/test_command.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from kubernetes import client

from splitsched.launch import rights
from splitsched.launch.processes import free_port
from splitsched.testing import kube
from splitsched.testing.controlplane import REPO_ROOT, pid_alive
from splitsched.testing.manifests import TEST_NAMESPACE_LABEL
from tests.support.fixtures import ControlPlaneHandle
from tests.support.up import READY_LINE, cli_env, up_on_admin_context, up_process

#: Our nodes carry it (value: the test's namespace) and our pods select it, so that no
#: other test's node takes them.
NODE_LABEL = "splitsched.io/test-up"


def _bound(core: client.CoreV1Api, namespace: str, names: list[str], nodes: list[str]) -> bool:
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
    return all(n in pods and pods[n].spec.node_name in nodes for n in names)


def test_up_schedules_pods_and_sigterm_leaves_no_process_behind(
    control_plane: ControlPlaneHandle, kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(kube_api)
    with up_on_admin_context(
        control_plane.kubeconfig_path,
        kube_api,
        namespace=namespace,
        directory=tmp_path,
        label=NODE_LABEL,
        nodes=2,
    ) as session:
        up, state, nodes = session.run, session.state, session.nodes
        assert "(context admin) as splitsched-admin: may do all it needs" in up.output
        fit = kube.make_pods(6, name_prefix="fit", node_selector={NODE_LABEL: namespace})
        unfit = kube.make_pod("unfit", node_selector={NODE_LABEL: "nowhere"})
        names = kube.create_pods(kube_api, namespace=namespace, pods=[*fit, unfit])
        kube.wait_for(
            lambda: _bound(core, namespace, names[:-1], nodes),
            timeout=60,
            message="the 6 pods bound to the test's nodes",
        )
        listed = subprocess.run(
            [sys.executable, "-m", "splitsched.cli", "pods", "--pending", "-n", namespace],
            capture_output=True, text=True, timeout=60, check=False, cwd=REPO_ROOT,
            env={**cli_env(state), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        assert f"{namespace}/unfit" in listed.stdout and "fit-0" not in listed.stdout
        children = up.children()
        assert len(children) == 4  # the watcher, 2 binders, the scheduler
        code = up.stop()
    assert code == 0, up.output
    assert up.lines[-1] == "stopped"
    assert [pid for pid in children if pid_alive(pid)] == []


def test_every_profile_of_the_config_is_served(
    control_plane: ControlPlaneHandle, kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        "  - schedulerName: splitsched\n"
        "  - schedulerName: splitsched-packed\n"
    )
    with up_on_admin_context(
        control_plane.kubeconfig_path,
        kube_api,
        namespace=namespace,
        directory=tmp_path,
        label=NODE_LABEL,
        extra=["--config", str(config)],
    ) as session:
        assert "Pods with schedulerName: splitsched are scheduled here" in session.run.output
        pods = [
            kube.make_pod(name, scheduler_name=name, node_selector={NODE_LABEL: namespace})
            for name in ("splitsched", "splitsched-packed")
        ]
        names = kube.create_pods(kube_api, namespace=namespace, pods=pods)
        kube.wait_for(
            lambda: _bound(client.CoreV1Api(kube_api), namespace, names, session.nodes),
            timeout=60,
            message="one pod of each profile bound",
        )


def test_an_identity_without_binding_rights_is_told_what_to_grant(
    control_plane: ControlPlaneHandle, kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    watcher_only = kube.service_account_kubeconfig(
        kube_api,
        namespace=namespace,
        name="viewer",
        cluster_role_rules=rights.WATCHER_RULES,
        directory=tmp_path,
    )
    state = tmp_path / "state"
    argv = ["--kubeconfig", str(watcher_only), "--state-dir", str(state)]
    refused = subprocess.run(
        [sys.executable, "-m", "splitsched.cli", "up", *argv],
        capture_output=True, text=True, timeout=120, check=False, cwd=REPO_ROOT,
    )  # fmt: skip
    assert refused.returncode == 5, refused.stderr
    user = f"system:serviceaccount:{namespace}:viewer"
    assert refused.stderr.startswith(f"{user} may not do everything splitsched up needs")
    assert "  create pods/binding in all namespaces (binder)\n" in refused.stderr
    assert "  create pods/eviction in all namespaces (binder)\n" in refused.stderr
    assert "list nodes" not in refused.stderr  # the watcher's rights are there
    assert "Nothing was started" in refused.stderr and not state.joinpath("logs").exists()
    role, binding = yaml.safe_load_all(refused.stdout)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "viewer",
                                    "namespace": namespace}]  # fmt: skip

    # A cluster admin applies it (labelled so that the namespace's clean-up removes it).
    rbac = client.RbacAuthorizationV1Api(kube_api)
    for doc in (role, binding):
        doc["metadata"]["labels"] = {TEST_NAMESPACE_LABEL: namespace}
    rbac.create_cluster_role(role)
    rbac.create_cluster_role_binding(binding)
    nodes = kube.create_kwok_nodes(
        kube_api, 1, name_prefix=f"{namespace}-n", labels={NODE_LABEL: namespace}
    )
    try:
        with up_process([*argv, "--listen", f"127.0.0.1:{free_port()}"]) as up:
            up.wait_for(READY_LINE, timeout=120)
            assert f"as {user}: may do all it needs" in up.output
            kube.create_pods(
                kube_api,
                namespace=namespace,
                pods=[kube.make_pod("p", node_selector={NODE_LABEL: namespace})],
            )
            kube.wait_for(
                lambda: _bound(client.CoreV1Api(kube_api), namespace, ["p"], nodes),
                timeout=60,
                message="the pod bound by the granted identity",
            )
            assert up.stop() == 0, up.output
    finally:
        kube.delete_nodes(kube_api, nodes)
