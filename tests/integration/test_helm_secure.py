"""The chart is secure by default (issue 17 items 1 and 2), shown with what it renders.

* ``helm template`` with default values makes a CA and one certificate per component
  (plus one for operators' tools), each component mounts only its own, the certificates
  name the Services the others dial, and ``--trusted-clients`` lets the binders and the
  watcher be called only by the scheduler, the scheduler's restricted RPCs only by the
  binders and the ops identity;
* the NetworkPolicies, read as data by a small evaluator with Kubernetes' semantics
  (podSelector/namespaceSelector, ports), admit exactly: scheduler -> binders and
  watcher, binders -> scheduler, the configured tools -> scheduler, the monitoring
  namespace -> metrics ports;
* the three services run as local processes against the real control plane with exactly
  the rendered certificates and TLS flags (only the mount path and the dialled addresses
  differ); pods schedule, and every restricted RPC (Bind, BindBatch, Preempt,
  ReportUnschedulable, ReportBindingOutcome, Simulate, StreamClusterEvents) is refused to
  a caller without a certificate, with one from another CA (even naming the scheduler),
  and with a certificate of the release's CA but the wrong identity; and issue 17's two
  attacks replayed with real requests (bind another scheduler's pending pod, evict a
  running pod) leave the pod Pending and the victim running; even with the scheduler's
  own certificate, which the binders trust, the binder's guard refuses a foreign
  schedulerName and a victim of the preemptor's priority, and writes nothing;
* ``helm install`` then ``helm upgrade`` against the real API server keeps every
  certificate (``lookup``); deleting the CA Secret and upgrading rotates them all.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID
from kubernetes import client

from splitsched.testing import controlplane, kube, stack
from splitsched.v1 import binder_pb2, scheduler_pb2, types_pb2, watcher_pb2
from tests.support import certs
from tests.support.fixtures import ControlPlaneHandle
from tests.support.helm import CHART, COMPONENTS, Manifest, cluster_helm, container, one, render

#: Who holds a certificate: the three components and the operators' tools.
HOLDERS = (*COMPONENTS, "ops")
TLS_FLAGS = ("--tls-", "--peer-tls-", "--trusted-clients")
MOUNT = "/etc/splitsched-tls"
#: service -> the RPCs only trusted clients may call, with an (empty) request for each.
RESTRICTED: dict[str, tuple[str, dict[str, Any]]] = {
    "binder": (
        "splitsched.v1.Binder",
        {
            "Bind": binder_pb2.BindRequest(),
            "BindBatch": binder_pb2.BindBatchRequest(),
            "Preempt": binder_pb2.PreemptRequest(),
            "ReportUnschedulable": binder_pb2.UnschedulableReport(),
        },
    ),
    "scheduler": (
        "splitsched.v1.Scheduler",
        {
            "ReportBindingOutcome": scheduler_pb2.ReportBindingOutcomeRequest(),
            "Simulate": scheduler_pb2.SimulateRequest(),
        },
    ),
    "watcher": (
        "splitsched.v1.Watcher",
        {"StreamClusterEvents": watcher_pb2.StreamClusterEventsRequest()},
    ),
}
#: service -> certificate holders of the release's CA it must refuse.
WRONG_IDENTITIES = {
    "binder": ("ops", "watcher", "binder"),
    "scheduler": ("watcher", "scheduler"),
    "watcher": ("ops", "binder", "watcher"),
}


@pytest.fixture(scope="module")
def helm() -> Path:
    controlplane.ensure_binaries(("helm",))
    return controlplane.binary_path("helm")


def identity(holder: str, *, release: str = "splitsched", namespace: str = "splitsched") -> str:
    fullname = release if "splitsched" in release else f"{release}-splitsched"
    return f"{fullname}-{holder}.{namespace}"


def secret_files(docs: Sequence[Manifest], holder: str) -> dict[str, bytes]:
    [secret] = [
        d
        for d in docs
        if d["kind"] == "Secret"
        and d["metadata"]["labels"]["app.kubernetes.io/component"] == holder
    ]
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def common_name(cert: x509.Certificate) -> str:
    [attr] = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attr.value)


def dns_names(cert: x509.Certificate) -> set[str]:
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()  # the ops certificate is a client's: it names no host
    return set(sans.get_values_for_type(x509.DNSName))


def flag(args: Sequence[str], name: str) -> str:
    [value] = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    return value


def dialled_host(target: str) -> str:
    return target.removeprefix("dns:///").rsplit(":", 1)[0]


# -- certificates and identities ---------------------------------------------------------------


def test_default_chart_gives_each_component_its_own_certificate_and_trust(helm: Path) -> None:
    docs = render(helm, release="prod", namespace="sched")
    ca = x509.load_pem_x509_certificate(secret_files(docs, "ca")["tls.crt"])
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    args = {c: container(docs, c)["args"] for c in COMPONENTS}
    dialled = {
        "watcher": [dialled_host(flag(args["scheduler"], "watcher"))],
        "binder": [dialled_host(flag(args["scheduler"], "binders"))],
        "scheduler": [dialled_host(flag(args["binder"], "scheduler"))],
    }
    for holder in HOLDERS:
        files = secret_files(docs, holder)
        assert files["ca.crt"] == secret_files(docs, "ca")["tls.crt"], holder
        cert = x509.load_pem_x509_certificate(files["tls.crt"])
        cert.verify_directly_issued_by(ca)
        assert common_name(cert) == identity(holder, release="prod", namespace="sched")
        names = dns_names(cert)
        assert set(dialled.get(holder, [])) <= names, holder
        assert ("localhost" in names) == (holder != "ops")  # kubectl port-forward clients
    # Each pod mounts its own Secret, never the CA's key or another component's.
    for component in COMPONENTS:
        pod = one(docs, "Deployment", component)["spec"]["template"]["spec"]
        [volume] = [v for v in pod["volumes"] if v["name"] == "tls"]
        assert volume["secret"]["secretName"] == f"prod-splitsched-{component}-tls"
    trusted = {c: set(flag(args[c], "trusted-clients").split(",")) for c in COMPONENTS}
    ids = {h: identity(h, release="prod", namespace="sched") for h in HOLDERS}
    assert trusted == {
        "binder": {ids["scheduler"]},
        "watcher": {ids["scheduler"]},
        "scheduler": {ids["binder"], f"Simulate={ids['ops']}"},  # ops: Simulate only
    }


def test_tls_off_must_be_explicit_and_the_notes_say_what_it_exposes(
    helm: Path, control_plane: ControlPlaneHandle, tmp_path: Path
) -> None:
    docs = render(helm, sets=["tls.enabled=false"])
    assert not [d for d in docs if d["kind"] == "Secret"]
    for component in COMPONENTS:
        assert not [a for a in container(docs, component)["args"] if a.startswith(TLS_FLAGS)]
    run = cluster_helm(helm, control_plane.kubeconfig_path, tmp_path)
    notes = {
        flag: run(
            "install", "x", str(CHART), "--dry-run=client", "--set", f"tls.enabled={flag}"
        ).partition("NOTES:")[2]
        for flag in ("true", "false")
    }
    assert "WARNING: tls.enabled is false" in notes["false"]
    assert "bind any pending pod to any node" in notes["false"]
    assert "WARNING" not in notes["true"]


def test_cert_manager_issuer_replaces_the_generated_ca(helm: Path) -> None:
    docs = render(helm, sets=["tls.certManager.issuerRef.name=corp-ca"])
    assert not [d for d in docs if d["kind"] == "Secret"]
    certificates = {d["spec"]["secretName"]: d for d in docs if d["kind"] == "Certificate"}
    assert set(certificates) == {f"splitsched-{h}-tls" for h in HOLDERS}
    for holder in HOLDERS:
        spec = certificates[f"splitsched-{holder}-tls"]["spec"]
        assert spec["commonName"] == identity(holder)
        assert spec["issuerRef"] == {
            "name": "corp-ca",
            "kind": "Issuer",
            "group": "cert-manager.io",
        }
        assert {"server auth", "client auth"} <= set(spec["usages"])


# -- NetworkPolicies as data -------------------------------------------------------------------


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"evaluator knows matchLabels only: {selector}"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def peer_admits(peer: Mapping[str, Any], policy_ns: str, src: Mapping[str, Any]) -> bool:
    assert "ipBlock" not in peer
    if "namespaceSelector" in peer:
        ns_ok = selects(peer["namespaceSelector"], src["namespace_labels"])
    else:
        ns_ok = src["namespace"] == policy_ns
    return ns_ok and selects(peer.get("podSelector", {}), src["labels"])


def admits(policies: Sequence[Manifest], dest: Mapping[str, str], port: int, src: Any) -> bool:
    """Kubernetes semantics for ingress: a pod no policy selects admits everything; else
    some rule of a selecting policy must match the port and the source."""
    selecting = [p for p in policies if selects(p["spec"]["podSelector"], dest)]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            ports = [p["port"] for p in rule.get("ports", [])]
            if ports and port not in ports:
                continue
            peers = rule.get("from", [])
            ns = policy["metadata"]["namespace"]
            if not peers or any(peer_admits(p, ns, src) for p in peers):
                return True
    return False


def pod_labels(docs: Sequence[Manifest], component: str) -> dict[str, str]:
    labels = one(docs, "Deployment", component)["spec"]["template"]["metadata"]["labels"]
    return dict(labels)


def source(namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "labels": labels,
        "namespace_labels": {"kubernetes.io/metadata.name": namespace},
    }


PORTS = {"scheduler": (50050, 9090), "watcher": (50051, 9091), "binder": (50052, 9092)}


def test_network_policies_admit_exactly_the_components_that_call_each_port(helm: Path) -> None:
    docs = render(
        helm,
        namespace="sched",
        sets=["networkPolicy.schedulerClients[0].namespaceSelector.matchLabels.team=ops"],
    )
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert {p["metadata"]["labels"]["app.kubernetes.io/component"] for p in policies} == set(
        COMPONENTS
    )
    sources = {c: source("sched", pod_labels(docs, c)) for c in COMPONENTS}
    sources["other pod"] = source("sched", {"app": "anything"})
    # A pod elsewhere wearing the scheduler's labels is not the scheduler.
    sources["fake scheduler"] = source("default", pod_labels(docs, "scheduler"))
    sources["monitoring"] = source("monitoring", {"app": "prometheus"})
    sources["ops tool"] = {**source("tools", {}), "namespace_labels": {"team": "ops"}}
    grpc_callers = {
        "binder": {"scheduler"},
        "watcher": {"scheduler"},
        "scheduler": {"binder", "ops tool"},
    }
    for dest, (grpc_port, http_port) in PORTS.items():
        labels = pod_labels(docs, dest)
        for name, src in sources.items():
            allowed = admits(policies, labels, grpc_port, src)
            assert allowed == (name in grpc_callers[dest]), f"{name} -> {dest}:{grpc_port}"
            allowed = admits(policies, labels, http_port, src)
            assert allowed == (name == "monitoring"), f"{name} -> {dest}:{http_port}"
    # Off: nothing is rendered, so every pod admits everyone (the evaluator agrees).
    off = render(helm, sets=["networkPolicy.enabled=false"])
    assert not [d for d in off if d["kind"] == "NetworkPolicy"]
    assert admits([], pod_labels(docs, "binder"), 50052, sources["other pod"])


# -- the rendered certificates and flags, running ----------------------------------------------


def write_secrets(docs: Sequence[Manifest], directory: Path) -> dict[str, Path]:
    """Each holder's Secret as the files its pod would see at the mount."""
    dirs = {}
    for holder in HOLDERS:
        dirs[holder] = directory / holder
        dirs[holder].mkdir(parents=True)
        for name, data in secret_files(docs, holder).items():
            (dirs[holder] / name).write_bytes(data)
    return dirs


def rendered_tls_args(docs: Sequence[Manifest], component: str, mounted: Path) -> list[str]:
    """The Deployment's TLS flags, the mount path replaced by where the Secret's files are;
    the dialled addresses are loopback here, named localhost in the certificates."""
    args = [a.replace(MOUNT, str(mounted)) for a in container(docs, component)["args"]]
    tls = [a for a in args if a.startswith(TLS_FLAGS)]
    assert len(tls) == (5 if component == "watcher" else 8), tls
    if component != "watcher":
        tls.append("--peer-server-name=localhost")
    return tls


def call(target: str, service: str, method: str, request: Any, creds: Any) -> grpc.StatusCode:
    """One RPC with these channel credentials (None: plaintext); its status code."""
    opts = [("grpc.ssl_target_name_override", "localhost")]
    channel = (
        grpc.secure_channel(target, creds, options=opts)
        if creds is not None
        else grpc.insecure_channel(target)
    )
    path = f"/{service}/{method}"
    kw = {"request_serializer": type(request).SerializeToString, "response_deserializer": bytes}
    with channel:
        try:
            if method == "StreamClusterEvents":
                next(iter(channel.unary_stream(path, **kw)(request, timeout=5)))
            else:
                channel.unary_unary(path, **kw)(request, timeout=5)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def credentials(ca: Path, holder_dir: Path | None) -> grpc.ChannelCredentials:
    chain = key = None
    if holder_dir is not None:
        chain, key = (holder_dir / "tls.crt").read_bytes(), (holder_dir / "tls.key").read_bytes()
    return grpc.ssl_channel_credentials(ca.read_bytes(), key, chain)


def assert_every_restricted_rpc_refused(
    running: stack.Stack, dirs: Mapping[str, Path], tmp_path: Path
) -> None:
    ca = dirs["ops"] / "ca.crt"  # every holder's ca.crt is the CA's certificate
    # A certificate from another CA, even one naming the scheduler, fails the handshake.
    forger = certs.make_ca(tmp_path / "forged")
    forged = certs.issue(forger, tmp_path / "forged", name="x", common_name=identity("scheduler"))
    forged_dir = tmp_path / "forged-holder"
    forged_dir.mkdir()
    (forged_dir / "tls.crt").write_bytes(forged.cert_path.read_bytes())
    (forged_dir / "tls.key").write_bytes(forged.key_path.read_bytes())
    binder = next(s for s in running.services if s.name.startswith("binder"))
    targets = {
        "binder": binder.grpc_target,
        "watcher": running.watcher.grpc_target,
        "scheduler": running.scheduler.grpc_target,
    }
    for svc, (full_name, methods) in RESTRICTED.items():
        callers: dict[str, Any] = {
            "plaintext": None,
            "no certificate": credentials(ca, None),
            "another CA": credentials(ca, forged_dir),
        }
        for holder in WRONG_IDENTITIES[svc]:
            callers[holder] = credentials(ca, dirs[holder])
        for method, request in methods.items():
            for who, creds in callers.items():
                code = call(targets[svc], full_name, method, request, creds)
                expected = (
                    grpc.StatusCode.PERMISSION_DENIED
                    if who in HOLDERS
                    else grpc.StatusCode.UNAVAILABLE
                )
                assert code == expected, f"{who} calling {svc} {method}: {code}"
    # The trusted ops identity does reach Simulate (the refusals above are about identity).
    ops = credentials(ca, dirs["ops"])
    code = call(targets["scheduler"], "splitsched.v1.Scheduler", "Simulate",
                scheduler_pb2.SimulateRequest(), ops)  # fmt: skip
    assert code != grpc.StatusCode.PERMISSION_DENIED
    # ... and only Simulate: it cannot forge a binding outcome.
    code = call(targets["scheduler"], "splitsched.v1.Scheduler", "ReportBindingOutcome",
                scheduler_pb2.ReportBindingOutcomeRequest(), ops)  # fmt: skip
    assert code == grpc.StatusCode.PERMISSION_DENIED


def replay_the_issue_attacks(
    running: stack.Stack, dirs: Mapping[str, Path], api: client.ApiClient, namespace: str
) -> None:
    """Issue 17's attacks with real requests: bind another scheduler's pending pod, and
    evict a running pod for it, with no certificate and with the release's ops and
    binder certificates. The pod stays Pending and the victim keeps running."""
    core = client.CoreV1Api(api)
    [foreign] = kube.create_pods(
        api,
        namespace=namespace,
        pods=[kube.make_pod("foreign", scheduler_name="default-scheduler")],
    )
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
    victim = next(p for name, p in pods.items() if name != foreign and p.spec.node_name)

    def ref(pod: Any) -> Any:
        return types_pb2.PodRef(namespace=namespace, name=pod.metadata.name, uid=pod.metadata.uid)

    attacks = {
        "Bind": binder_pb2.BindRequest(
            decision_id="attack-bind",
            pod=ref(pods[foreign]),
            node=victim.spec.node_name,
            max_attempts=1,
            profile="splitsched",
        ),
        "Preempt": binder_pb2.PreemptRequest(
            decision_id="attack-preempt",
            preemptor=ref(pods[foreign]),
            node=victim.spec.node_name,
            victims=[ref(victim)],
        ),
    }
    ca = dirs["ops"] / "ca.crt"
    binder = next(s for s in running.services if s.name.startswith("binder"))
    for who, holder in (("no certificate", None), ("ops", dirs["ops"]), ("binder", dirs["binder"])):
        for method, request in attacks.items():
            creds = credentials(ca, holder)
            code = call(binder.grpc_target, "splitsched.v1.Binder", method, request, creds)
            assert code != grpc.StatusCode.OK, f"{who} made a binder {method}"
    time.sleep(2)  # a binder that had accepted would have bound or evicted by now
    after = core.read_namespaced_pod(foreign, namespace)
    assert not after.spec.node_name and not (after.status.nominated_node_name or "")
    kept = core.read_namespaced_pod(victim.metadata.name, namespace)
    assert kept.metadata.uid == victim.metadata.uid and kept.metadata.deletion_timestamp is None


def refused_total(binder: stack.Service, reason: str) -> float:
    """splitsched_binder_refused_total{reason} as the binder's /metrics says (0 before any)."""
    prefix = f'splitsched_binder_refused_total{{reason="{reason}"}} '
    lines = [line for line in binder.metrics().splitlines() if line.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else 0.0


def ask_binder(target: str, method: str, request: Any, creds: grpc.ChannelCredentials) -> Any:
    """The binder's answer (BindResponse or BinderAck) to one RPC over mTLS."""
    answers: dict[str, Any] = {"Bind": binder_pb2.BindResponse, "Preempt": binder_pb2.BinderAck}
    opts = [("grpc.ssl_target_name_override", "localhost")]
    with grpc.secure_channel(target, creds, options=opts) as channel:
        rpc = channel.unary_unary(f"/splitsched.v1.Binder/{method}",
                                  request_serializer=type(request).SerializeToString,
                                  response_deserializer=answers[method].FromString)  # fmt: skip
        return rpc(request, timeout=5)


def replay_with_the_scheduler_identity(
    running: stack.Stack, dirs: Mapping[str, Path], api: client.ApiClient, namespace: str
) -> None:
    """Issue 17's "done when": with the release's scheduler certificate, which the binders
    trust, a Bind of another scheduler's pending pod and a Preempt whose victim's priority
    equals the preemptor's (no PriorityClass: 0, as the running pods') are accepted, then
    refused by the binder's guard: counted by reason, logged with the scheduler's
    identity, and nothing written."""
    core = client.CoreV1Api(api)
    victim = next(p for p in core.list_namespaced_pod(namespace).items if p.spec.node_name)
    node, victim_uid = victim.spec.node_name, victim.metadata.uid
    foreign, preemptor = kube.create_pods(api, namespace=namespace, pods=[
        kube.make_pod("foreign-trusted", scheduler_name="default-scheduler"),
        kube.make_pod("equal-preemptor", cpu="100"),  # fits no node: stays Pending
    ])  # fmt: skip
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}

    def ref(name: str) -> types_pb2.PodRef:
        uid = pods[name].metadata.uid
        return types_pb2.PodRef(namespace=namespace, name=name, uid=uid)

    bind = binder_pb2.BindRequest(decision_id="trusted-bind", pod=ref(foreign), node=node,
                                  max_attempts=1, profile="splitsched")  # fmt: skip
    bind.deadline.FromSeconds(int(time.time()) + 60)
    preempt = binder_pb2.PreemptRequest(decision_id="trusted-preempt", preemptor=ref(preemptor),
                                        node=node, victims=[ref(victim.metadata.name)])  # fmt: skip
    binder = next(s for s in running.services if s.name.startswith("binder"))
    scheduler = credentials(dirs["scheduler"] / "ca.crt", dirs["scheduler"])
    for method, request, reason in (
        ("Bind", bind, "scheduler_name"),
        ("Preempt", preempt, "victim_priority"),
    ):
        before = refused_total(binder, reason)
        answer = ask_binder(binder.grpc_target, method, request, scheduler)
        assert answer.accepted, f"{method} not even queued: {answer.reason}"
        kube.wait_for(lambda: refused_total(binder, reason) > before,  # noqa: B023 (called now)
                      timeout=20, message=f"the binder refusing {method} ({reason})")  # fmt: skip
    log = binder.log_path.read_text(errors="replace").splitlines()
    for what in (f"binding {namespace}/{foreign} to {node}",
                 f"preemption for {namespace}/{preemptor} on {node}"):  # fmt: skip
        # "refused WHAT asked by NAME, NAME, ...: why"; the names are the certificate's.
        [line] = [x for x in log if f"refused {what} asked by " in x]
        asked_by = line.partition(" asked by ")[2].partition(": ")[0].split(", ")
        assert identity("scheduler", namespace=namespace) in asked_by, line
    time.sleep(3)  # a binder that had accepted would have bound or evicted by now
    assert not core.read_namespaced_pod(foreign, namespace).spec.node_name
    assert not (core.read_namespaced_pod(preemptor, namespace).status.nominated_node_name or "")
    kept = [p for p in core.list_namespaced_pod(namespace).items if p.metadata.uid == victim_uid]
    assert kept and kept[0].metadata.deletion_timestamp is None, "the victim was evicted"


def test_services_run_with_exactly_the_rendered_certificates_and_flags(
    helm: Path, kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    docs = render(helm, namespace=namespace)
    dirs = write_secrets(docs, tmp_path / "secrets")
    profiles_path = tmp_path / "profiles.yaml"
    profiles_path.write_text(one(docs, "ConfigMap", "scheduler")["data"]["profiles.yaml"])
    names_flag = [
        a for a in container(docs, "watcher")["args"] if a.startswith("--scheduler-names")
    ]
    configs = stack.component_kubeconfigs(kube_api, namespace=namespace, directory=tmp_path)
    nodes = kube.create_kwok_nodes(
        kube_api, 2, name_prefix=f"helm-tls-{uuid.uuid4().hex[:5]}", cpu="4", memory="8Gi"
    )
    running = stack.Stack(
        workdir=tmp_path / "stack",
        watcher_kubeconfig=configs["watcher"],
        binder_kubeconfig=configs["binder"],
        binders=2,
        tls=False,  # the chart's flags below, not the Stack's own certificates
        watcher_args=[*rendered_tls_args(docs, "watcher", dirs["watcher"]), *names_flag],
        binder_args=rendered_tls_args(docs, "binder", dirs["binder"]),
        scheduler_args=[
            *rendered_tls_args(docs, "scheduler", dirs["scheduler"]),
            "--profiles",
            str(profiles_path),
        ],
    )
    try:
        with running:
            pods = kube.create_pods(
                kube_api, namespace=namespace, pods=kube.make_pods(6, name_prefix="tls")
            )
            core = client.CoreV1Api(kube_api)

            def all_bound() -> bool:
                listed = core.list_namespaced_pod(namespace).items
                return len(listed) == len(pods) and all(p.spec.node_name for p in listed)

            kube.wait_for(all_bound, timeout=60, message="pods bound over the chart's mTLS")
            assert_every_restricted_rpc_refused(running, dirs, tmp_path)
            replay_the_issue_attacks(running, dirs, kube_api, namespace)
            replay_with_the_scheduler_identity(running, dirs, kube_api, namespace)
    finally:
        kube.delete_nodes(kube_api, nodes)


# -- helm upgrade keeps the certificates ---------------------------------------------------------


def tls_secrets(core: client.CoreV1Api, namespace: str, release: str) -> dict[str, dict[str, str]]:
    selector = f"app.kubernetes.io/instance={release}"
    return {
        s.metadata.name: dict(s.data)
        for s in core.list_namespaced_secret(namespace, label_selector=selector).items
    }


def test_helm_upgrade_keeps_the_certificates_and_a_deleted_ca_rotates_them(
    helm: Path,
    control_plane: ControlPlaneHandle,
    kube_api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    run = cluster_helm(helm, control_plane.kubeconfig_path, tmp_path)
    labels = tmp_path / "labels.yaml"
    labels.write_text(
        yaml.safe_dump({"global": {"commonLabels": {kube.TEST_NAMESPACE_LABEL: namespace}}})
    )
    release = f"keep-{uuid.uuid4().hex[:6]}"
    base = [release, str(CHART), "--namespace", namespace, "-f", str(labels)]
    core = client.CoreV1Api(kube_api)
    run("install", *base)
    first = tls_secrets(core, namespace, release)
    fullname = f"{release}-splitsched"
    assert set(first) == {f"{fullname}-ca", *(f"{fullname}-{h}-tls" for h in HOLDERS)}

    run("upgrade", *base, "--set", "binder.replicas=3")
    assert tls_secrets(core, namespace, release) == first

    # Rotation: without the CA Secret the next upgrade makes a new CA and signs anew.
    core.delete_namespaced_secret(f"{fullname}-ca", namespace)
    run("upgrade", *base)
    rotated = tls_secrets(core, namespace, release)
    ca = rotated[f"{fullname}-ca"]["tls.crt"]
    assert ca != first[f"{fullname}-ca"]["tls.crt"]
    for holder in HOLDERS:
        data = rotated[f"{fullname}-{holder}-tls"]
        assert (
            data["ca.crt"] == ca and data["tls.crt"] != first[f"{fullname}-{holder}-tls"]["tls.crt"]
        )
    run("uninstall", release, "--namespace", namespace, "--wait")
