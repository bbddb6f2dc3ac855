"""How each control-plane process is run and when it counts as up: the command lines of
etcd, kube-apiserver and kwok (pure functions of the recorded ports and paths) and their
health checks. ``ControlPlane`` starts them in this order.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import yaml

from splitsched.testing.controlplane.state import ControlPlaneError, ControlPlaneState
from splitsched.testing.manifests import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"


# -- etcd -----------------------------------------------------------------------------------


def etcd_client_url(state: ControlPlaneState) -> str:
    return f"http://127.0.0.1:{state.etcd_client_port}"


def etcd_argv(binary: Path, state: ControlPlaneState, *, data_dir: Path) -> list[str]:
    client = etcd_client_url(state)
    peer = f"http://127.0.0.1:{state.etcd_peer_port}"
    return [
        str(binary),
        "--name=splitsched",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=splitsched={peer}",
        "--initial-cluster-state=new",
        # A throwaway test store: skip fsync, it dominates on small machines.
        "--unsafe-no-fsync=true",
        "--quota-backend-bytes=8589934592",
        "--log-level=warn",
    ]


def etcd_healthy(state: ControlPlaneState) -> bool:
    try:
        with urllib.request.urlopen(f"{etcd_client_url(state)}/health", timeout=2) as resp:
            body = json.loads(resp.read())
            return str(body.get("health")) == "true"
    except (OSError, ValueError):
        return False


# -- kube-apiserver -------------------------------------------------------------------------


def apiserver_argv(binary: Path, state: ControlPlaneState, *, pki: Path) -> list[str]:
    """In real-node mode (``state.real_node``) the server listens on the node bridge's
    address, admits pods with their ServiceAccount, and reaches kubelets with a client
    certificate; otherwise it serves loopback for kwok's nodes only."""
    return [
        str(binary),
        f"--etcd-servers={etcd_client_url(state)}",
        f"--bind-address={state.address}",
        f"--advertise-address={state.address}",
        f"--secure-port={state.apiserver_port}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--cert-dir={pki}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        *_admission_and_kubelet_flags(state, pki),
        # API Priority and Fairness on, as in every real cluster; its total concurrency is
        # the sum of these two (generous by default: benchmarks send bursts).
        "--enable-priority-and-fairness=true",
        f"--max-requests-inflight={state.max_requests_inflight}",
        f"--max-mutating-requests-inflight={state.max_mutating_requests_inflight}",
        "--profiling=false",
        "--v=1",
    ]


def _admission_and_kubelet_flags(state: ControlPlaneState, pki: Path) -> list[str]:
    if not state.real_node:
        # ServiceAccount admission off: tests create pods right after their namespace,
        # before the ServiceAccount controller has made its "default" account. And no
        # node lifecycle controller runs, which would lift the not-ready taint
        # TaintNodesByCondition puts on new nodes.
        return ["--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"]
    return [
        # kube-controller-manager runs, but not its node lifecycle controller (kwok's
        # nodes are not its business), so nothing would lift the not-ready taint.
        "--disable-admission-plugins=TaintNodesByCondition",
        f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'kubelet-client.key'}",
        "--kubelet-preferred-address-types=InternalIP",
    ]


#: What kube-controller-manager always runs: the controllers a scheduler relies on.
#: The PV binder binds claims to volumes (and completes the binder's volume step), the
#: protection controllers lift the finalizers the StorageObjectInUseProtection admission
#: plugin puts on claims and volumes, the ephemeral-volume controller makes the claims of
#: ephemeral volumes, the disruption controller computes PodDisruptionBudget status (the
#: Eviction API reads it), the garbage collector deletes what owners leave, the namespace
#: controller empties deleted namespaces, the ServiceAccount controllers make accounts,
#: tokens and ``kube-root-ca.crt``, and the resourceclaim controller makes the
#: ResourceClaims of pods' ResourceClaimTemplates (Dynamic Resource Allocation). Not the
#: node lifecycle controller: tests make nodes NotReady on purpose and must see exactly
#: what they made (kwok keeps its nodes' leases).
CONTROLLERS = (
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "ephemeral-volume-controller",
    "disruption-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "resourceclaim-controller",
)
#: Added in real-node mode: what pods from a Helm chart need (Deployments, ReplicaSets,
#: Services' endpoints for kube-proxy).
NODE_MODE_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "endpointslice-controller",
)


def controllers(state: ControlPlaneState) -> tuple[str, ...]:
    return (*CONTROLLERS, *NODE_MODE_CONTROLLERS) if state.real_node else CONTROLLERS


def controller_manager_argv(
    binary: Path, state: ControlPlaneState, *, pki: Path, kubeconfig: Path
) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--controllers={','.join(controllers(state))}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        "--use-service-account-credentials=false",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={state.controller_manager_port}",
        f"--cert-dir={pki / 'kube-controller-manager'}",
        "--concurrent-deployment-syncs=2",
        "--concurrent-replicaset-syncs=2",
        "--profiling=false",
        "--v=1",
    ]


def kube_scheduler_argv(
    binary: Path, state: ControlPlaneState, *, pki: Path, kubeconfig: Path
) -> list[str]:
    """The cluster's default scheduler (``default-scheduler``), with its default profile."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={state.scheduler_port}",
        f"--cert-dir={pki / 'kube-scheduler'}",
        "--profiling=false",
        "--v=1",
    ]


def self_signed_healthy(port: int) -> bool:
    """``/healthz`` on a component's self-signed secure port (no client certificate)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    url = f"https://127.0.0.1:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except (OSError, ssl.SSLError):
        return False


def apiserver_ready(state: ControlPlaneState, ctx: ssl.SSLContext, *, timeout: float) -> bool:
    """``/readyz`` answers ``ok`` to a client presenting ``ctx``'s certificate."""
    try:
        with urllib.request.urlopen(
            f"{state.server_url}/readyz", timeout=timeout, context=ctx
        ) as resp:
            return bool(resp.status == 200 and resp.read().strip() == b"ok")
    except (OSError, ssl.SSLError, urllib.error.URLError):
        return False


# -- kwok -----------------------------------------------------------------------------------


def kwok_config(stage_texts: Iterable[str], *, stages_dir: Path) -> str:
    """One config file of kwok's Stage documents; they must cover Nodes and Pods
    (``stages_dir`` only names where they came from in the error)."""
    texts = list(stage_texts)
    kinds = {
        doc.get("spec", {}).get("resourceRef", {}).get("kind")
        for text in texts
        for doc in yaml.safe_load_all(text)
        if isinstance(doc, dict)
    }
    if not {"Node", "Pod"} <= kinds:
        raise ControlPlaneError(f"kwok node and pod stages missing in {stages_dir}")
    return "\n---\n".join(t.strip() for t in texts) + "\n"


def kwok_argv(
    binary: Path, state: ControlPlaneState, *, kubeconfig: Path, config: Path
) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        "--manage-all-nodes=false",
        "--manage-single-node=",
        "--manage-nodes-with-annotation-selector="
        f"{KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
        "--manage-nodes-with-label-selector=",
        "--node-lease-duration-seconds=40",
        "--node-ip=127.0.0.1",
        f"--server-address=127.0.0.1:{state.kwok_port}",
        "--cidr=10.244.0.0/16",
    ]


def kwok_healthy(state: ControlPlaneState) -> bool:
    url = f"http://127.0.0.1:{state.kwok_port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False
