"""The Helm chart (helm/splitsched) against helm itself and the real control plane.

* ``helm lint`` and ``helm template`` pass for the default values and for
  ``ci/all-on-values.yaml`` (everything on, scheduler leader election with 2 replicas
  included), and fail on bad values (values.schema.json, or the chart's timing check);
* every rendered object carries the standard labels, and every Deployment's flags and
  SPLITSCHED_* variables parse with its service's own argument parser, pointing at the
  chart's Services;
* the rendered chart goes to the real kube-apiserver with ``dryRun=All`` and
  ``fieldValidation=Strict``, so the API server validates every object (ServiceMonitor and
  PrometheusRule are skipped: prometheus-operator's CRDs are not installed on the test
  control plane); the dashboard ConfigMap and the PrometheusRule hold the chart's files;
* RBAC: the chart's ClusterRoles equal ``stack.WATCHER_RULES`` / ``stack.BINDER_RULES``,
  and with leader election the scheduler's Role grants what ``stack.SCHEDULER_RULES``
  does, get/update narrowed to the release's Lease (without it: no scheduler RBAC);
  then the chart's ServiceAccounts, ClusterRoles and bindings are created for real,
  tokens are minted for its ServiceAccounts (TokenRequest), access reviews and real calls
  show each can do what its component needs and nothing it does not (the binder cannot
  list secrets or pods, the scheduler cannot touch pods), and the three services run
  with those tokens (the scheduler with none, and the chart's profiles) and schedule
  pods end to end; in HA mode the scheduler's token can use its Lease and nothing else,
  and two schedulers elect a leader with it and schedule.

The chart's secure defaults (mutual TLS with its own CA, trusted clients,
NetworkPolicies) have their own tests in test_helm_secure.py.

The helm binary is the cached one (``controlplane.binary_path("helm")``, built by
scripts/get-binaries.sh, which stamps helm's default Kubernetes version as helm's own release
build does). Templates checked against the control plane are rendered for its version
(``--kube-version``); one test renders without it, as the docs write it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from services.binder import settings as binder_settings
from services.scheduler import settings as scheduler_settings
from services.watcher import settings as watcher_settings
from splitsched.core import profiles
from splitsched.runtime import config, security
from splitsched.testing import controlplane, kube, stack
from tests.support import certs
from tests.support.fixtures import ControlPlaneHandle
from tests.support.helm import (
    CHART,
    COMPONENTS,
    Manifest,
    cluster_helm,
    container,
    find,
    helm_args,
    kube_version,
    one,
    render,
    run_helm,
)

CI_VALUES = CHART / "ci" / "all-on-values.yaml"
STANDARD_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
)
#: Kinds whose API is not served by the test control plane (prometheus-operator's CRDs).
NO_CRD_KINDS = frozenset({"ServiceMonitor", "PrometheusRule"})
#: The dashboard's ConfigMap and the PrometheusRule belong to no Deployment.
MONITORING_KINDS = frozenset({"ConfigMap", "PrometheusRule"})
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
VALUE_SETS = {"default": (), "all-on": (CI_VALUES,)}
#: tls.enabled with a Secret, trusted clients and a server name (its own tests below).
TLS_VALUES = CHART / "ci" / "tls-values.yaml"
SERVICES = {
    "watcher": watcher_settings.SERVICE,
    "scheduler": scheduler_settings.SERVICE,
    "binder": binder_settings.SERVICE,
}
#: Scheduler leader election on, everything else default.
HA_SETS = ("scheduler.replicas=2", "scheduler.leaderElection.enabled=true")


@pytest.fixture(scope="module")
def helm() -> Path:
    controlplane.ensure_binaries(("helm",))
    return controlplane.binary_path("helm")


# -- helm lint / template ------------------------------------------------------------------


def test_template_works_as_written_without_kube_version(helm: Path) -> None:
    """`helm template helm/splitsched` as the docs write it, with no --kube-version: the
    helm get-binaries.sh builds renders for its client-go's Kubernetes minor, as a
    released helm does (built with go install and no ldflags it said v1.20, and the
    chart's kubeVersion >=1.27 refused it)."""
    template = run_helm(helm, "template", "x", str(CHART))
    assert template.returncode == 0, template.stderr
    assert "kind: Deployment" in template.stdout


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_lint_and_template_pass(helm: Path, value_set: str) -> None:
    values = VALUE_SETS[value_set]
    lint = run_helm(helm, "lint", "--strict", str(CHART), *helm_args(values=values))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = render(helm, values=values)

    for doc in docs:
        labels = doc["metadata"].get("labels", {})
        missing = [k for k in STANDARD_LABELS if k not in labels]
        assert not missing, f"{doc['kind']}/{doc['metadata']['name']} lacks {missing}"
        # The CA's and the operators' certificate Secrets belong to no Deployment.
        owners: tuple[str, ...] = COMPONENTS
        if doc["kind"] == "Secret":
            owners = (*COMPONENTS, "ca", "ops")
        elif doc["kind"] in MONITORING_KINDS:
            owners = (*COMPONENTS, "monitoring")
        assert labels["app.kubernetes.io/component"] in owners
        assert labels["app.kubernetes.io/part-of"] == "splitsched"
    for component in COMPONENTS:
        deployment = one(docs, "Deployment", component)
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert all(k in pod_labels for k in STANDARD_LABELS)
        one(docs, "ServiceAccount", component)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("PodDisruptionBudget") == 3
    assert kinds.count("ClusterRole") == 2  # the scheduler's Role is namespaced
    scheduler = one(docs, "Deployment", "scheduler")["spec"]
    if value_set == "all-on":
        # Leader election: two replicas, rolled one at a time behind a synced standby.
        assert scheduler["replicas"] == 2
        assert scheduler["strategy"]["type"] == "RollingUpdate"
        assert scheduler["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
        one(docs, "Role", "scheduler")
        one(docs, "RoleBinding", "scheduler")
        assert kinds.count("ServiceMonitor") == 3
        one(docs, "HorizontalPodAutoscaler", "binder")
        # The HPA owns the binder's replica count.
        assert "replicas" not in one(docs, "Deployment", "binder")["spec"]
        env = {e["name"]: e.get("value") for e in container(docs, "scheduler")["env"]}
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http://")
        assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.25"
        assert env["SPLITSCHED_TRACES_TAIL"] == "off"
        assert env["SPLITSCHED_TRACES_KEEP_SLOWER_THAN"] == "2.5"
        binder_env = {e["name"]: e.get("value") for e in container(docs, "binder")["env"]}
        assert (binder_env["SPLITSCHED_BINDER_QPS"], binder_env["SPLITSCHED_BINDER_BURST"]) == (
            "200", "400",
        )  # fmt: skip
        check_dashboard_and_alerts(docs)
    else:
        assert "ServiceMonitor" not in kinds and "HorizontalPodAutoscaler" not in kinds
        assert "PrometheusRule" not in kinds
        assert not find(docs, "ConfigMap", "monitoring")
        assert one(docs, "Deployment", "binder")["spec"]["replicas"] == 2
        binder_env = {e["name"]: e.get("value") for e in container(docs, "binder")["env"]}
        assert binder_env["SPLITSCHED_BINDER_QPS"] == "0"  # no client-side limit: APF paces
        assert scheduler["replicas"] == 1
        assert scheduler["strategy"] == {"type": "Recreate"}
        assert "Role" not in kinds and "RoleBinding" not in kinds


def check_dashboard_and_alerts(docs: Sequence[Manifest]) -> None:
    """ci/all-on-values.yaml's dashboard ConfigMap (for Grafana's sidecar) and
    PrometheusRule hold the chart's files as they are (their metrics are checked against
    the running services in tests/e2e/test_metrics_health.py)."""
    dashboard = one(docs, "ConfigMap", "monitoring")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "Scheduling"}
    [data] = dashboard["data"].values()
    assert json.loads(data) == json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    rule = one(docs, "PrometheusRule", "monitoring")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["spec"] == yaml.safe_load((CHART / "files" / "prometheus-rules.yaml").read_text())
    # Prometheus' templates reach the rule unexpanded by Helm.
    assert "{{ $labels.namespace }}" in json.dumps(rule["spec"])


def test_dashboard_goes_where_and_as_the_sidecar_looks_for_it(helm: Path) -> None:
    """A sidecar configured with another label, watching only Grafana's namespace."""
    sets = [
        "monitoring.grafanaDashboard.enabled=true",
        "monitoring.grafanaDashboard.namespace=grafana",
        "monitoring.grafanaDashboard.label=find_me",
        "monitoring.grafanaDashboard.labelValue=yes",
    ]
    docs = render(helm, release="prod", namespace="sched", sets=sets)
    dashboard = one(docs, "ConfigMap", "monitoring")
    metadata = dashboard["metadata"]
    assert (metadata["name"], metadata["namespace"]) == ("prod-splitsched-dashboard", "grafana")
    assert metadata["labels"]["find_me"] == "yes" and "grafana_dashboard" not in metadata["labels"]
    assert "PrometheusRule" not in {d["kind"] for d in docs}


#: case -> (--set values, what the error must name)
BAD_VALUES: dict[str, tuple[list[str], str]] = {
    "negative replicas": (["binder.replicas=-1"], "/binder/replicas"),
    "replicas not a number": (["watcher.replicas=many"], "/watcher/replicas"),
    "two active schedulers": (["scheduler.replicas=2"], "/scheduler/replicas"),
    "two schedulers, election off": (
        ["scheduler.replicas=2", "scheduler.leaderElection.enabled=false"],
        "/scheduler/replicas",
    ),
    "three schedulers": ([*HA_SETS, "scheduler.replicas=3"], "/scheduler/replicas"),
    "zero lease duration": (
        [*HA_SETS, "scheduler.leaderElection.leaseDuration=0"],
        "/scheduler/leaderElection/leaseDuration",
    ),
    "unknown election key": ([*HA_SETS, "scheduler.leaderElection.lease=x"], "lease"),
    "unknown top-level key": (["bogus=1"], "bogus"),
    "unknown component key": (["binder.replica=3"], "replica"),
    "resources not a map": (["scheduler.resources=lots"], "/scheduler/resources"),
    "bad pull policy": (["global.image.pullPolicy=Sometimes"], "pullPolicy"),
    "bad sampler": (["global.otel.sampler=often"], "sampler"),
    "otel on without endpoint": (["global.otel.enabled=true"], "/global/otel/endpoint"),
    "no scheduler config": (["scheduler.config=null"], "config"),
    "scheduler config of a removed version": (
        ["scheduler.config.apiVersion=kubescheduler.config.k8s.io/v1beta3"],
        "/scheduler/config",
    ),
    "workers zero": (["binder.workers=0"], "/binder/workers"),
    "flow control with no queue": (["binder.flowControl.queues=0"], "/binder/flowControl/queues"),
    "flow control lends over 100%": (
        ["watcher.flowControl.lendablePercent=101"],
        "/watcher/flowControl/lendablePercent",
    ),
    "tls certificates valid no day": (["tls.validityDays=0"], "/tls/validityDays"),
    "tls issuer of an unknown kind": (["tls.certManager.issuerRef.kind=Vault"], "kind"),
    "network policy peer typo": (
        ["networkPolicy.schedulerClients[0].podSelectr.a=b"],
        "podSelectr",
    ),
    "tls trusted client with a comma": (["tls.trustedClients={a\\,b}"], "/tls/trustedClients"),
    "monitoring key typo": (["monitoring.prometheusRule.enable=true"], "enable"),
    "dashboard label empty": (
        ["monitoring.grafanaDashboard.label="],
        "/monitoring/grafanaDashboard/label",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_values_fail_lint_and_template(helm: Path, case: str) -> None:
    sets, named = BAD_VALUES[case]
    lint = run_helm(helm, "lint", str(CHART), *helm_args(sets=sets))
    assert lint.returncode != 0, f"helm lint accepted {sets}"
    template = run_helm(
        helm, "template", "x", str(CHART), "--kube-version", kube_version(), *helm_args(sets=sets)
    )
    assert template.returncode != 0, f"helm template accepted {sets}"
    assert "schema" in template.stderr and named in template.stderr, template.stderr


@pytest.mark.parametrize(
    "timings",
    [
        ("leaseDuration=7", "renewDeadline=7"),
        ("renewDeadline=2", "retryPeriod=2"),
        ("leaseDuration=5", "renewDeadline=8"),
    ],
)
def test_lease_timings_the_scheduler_would_refuse_fail_the_chart(
    helm: Path, timings: tuple[str, str]
) -> None:
    """lease duration > renew deadline > retry period, as the scheduler checks at start."""
    sets = [*HA_SETS, *(f"scheduler.leaderElection.{t}" for t in timings)]
    template = run_helm(
        helm, "template", "x", str(CHART), "--kube-version", kube_version(), *helm_args(sets=sets)
    )
    assert template.returncode != 0, f"helm template accepted {sets}"
    assert "leaseDuration > renewDeadline > retryPeriod" in template.stderr, template.stderr


# -- what the Deployments run ----------------------------------------------------------------


PARSERS = {
    "watcher": (watcher_settings.build_parser, watcher_settings.ENV_PREFIX),
    "scheduler": (scheduler_settings.build_parser, scheduler_settings.ENV_PREFIX),
    "binder": (binder_settings.build_parser, "SPLITSCHED_BINDER"),
}


def parsed_options(docs: Sequence[Manifest], component: str) -> Any:
    """The container's args and env as its service would read them (fieldRefs -> a name)."""
    main = container(docs, component)
    env = {e["name"]: e.get("value", "pod-name" if "valueFrom" in e else "") for e in main["env"]}
    build_parser, prefix = PARSERS[component]
    return config.parse_args(build_parser(), main["args"], env_prefix=prefix, environ=env)


def service_port(docs: Sequence[Manifest], name: str, port_name: str) -> int:
    [svc] = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == name]
    [port] = [p for p in svc["spec"]["ports"] if p["name"] == port_name]
    return int(port["port"])


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_deployments_parse_and_point_at_the_chart_services(helm: Path, value_set: str) -> None:
    docs = render(helm, release="prod", namespace="sched", values=VALUE_SETS[value_set])
    opts = {c: parsed_options(docs, c) for c in COMPONENTS}
    suffix = ".sched.svc.cluster.local"

    host, port = opts["scheduler"].watcher.rsplit(":", 1)
    assert host == f"prod-splitsched-watcher{suffix}"
    assert int(port) == service_port(docs, "prod-splitsched-watcher", "grpc")
    target = opts["scheduler"].binders
    assert target.startswith("dns:///prod-splitsched-binder-headless" + suffix)
    [headless] = [d for d in docs if d["metadata"]["name"] == "prod-splitsched-binder-headless"]
    assert headless["spec"]["clusterIP"] == "None"
    assert int(target.rsplit(":", 1)[1]) == service_port(docs, headless["metadata"]["name"], "grpc")
    host, port = opts["binder"].scheduler.rsplit(":", 1)
    if value_set == "all-on":
        # Leader election: binders resolve every scheduler pod, ready or not, and their
        # health-checked round robin reports to the SERVING one (the leader).
        assert host == f"dns:///prod-splitsched-scheduler-headless{suffix}"
        name = "prod-splitsched-scheduler-headless"
        services = {d["metadata"]["name"]: d for d in find(docs, "Service", "scheduler")}
        headless = services[name]
        assert headless["spec"]["clusterIP"] == "None"
        assert headless["spec"]["publishNotReadyAddresses"] is True
        selector = services["prod-splitsched-scheduler"]["spec"]["selector"]
        assert headless["spec"]["selector"] == selector
        assert int(port) == service_port(docs, name, "grpc")
    else:
        assert host == f"prod-splitsched-scheduler{suffix}"
        assert int(port) == service_port(docs, "prod-splitsched-scheduler", "grpc")
    assert int(port) == service_port(docs, "prod-splitsched-scheduler", "grpc")
    assert opts["binder"].binder_id == "pod-name"
    assert opts["binder"].workers == (128 if value_set == "all-on" else 64)
    for component in ("watcher", "binder"):
        assert opts[component].kubeconfig is None  # in-cluster
    sched = opts["scheduler"]
    sched_env = {e["name"]: e for e in container(docs, "scheduler")["env"]}
    if value_set == "all-on":
        assert sched.leader_elect and sched.standby_ready
        assert sched.kubeconfig is None  # in-cluster: the pod's token
        assert sched.lease_name == "prod-splitsched-scheduler"
        assert (sched.lease_duration, sched.renew_deadline) == (15.0, 10.0)
        assert (sched.retry_period, sched.settle_seconds) == (2.0, 5.0)
        # --lease-namespace defaults to $POD_NAMESPACE: the pod's own namespace.
        field = sched_env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert field == "metadata.namespace"
    else:
        assert not sched.leader_elect and not sched.standby_ready
        assert "POD_NAMESPACE" not in sched_env

    for component in COMPONENTS:
        main = container(docs, component)
        ports = {p["name"]: p["containerPort"] for p in main["ports"]}
        assert ports["grpc"] == int(opts[component].listen.rsplit(":", 1)[1])
        assert ports["http"] == int(opts[component].http_listen.rsplit(":", 1)[1])
        if component == "scheduler" and value_set == "all-on":
            # gRPC health is SERVING on the leader only; /readyz also on a synced standby.
            ready = main["readinessProbe"]["httpGet"]
            assert (ready["path"], ready["port"]) == ("/readyz", "http")
        else:
            # TLS is on by default: the kubelet's gRPC probe cannot speak it.
            assert main["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert main["livenessProbe"]["httpGet"]["path"] == "/healthz"
        # Readiness and liveness wait for the process to serve HTTP (tests/realnode saw
        # "connection refused" probe failures on every install without it).
        assert main["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        security = main["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["capabilities"]["drop"] == ["ALL"]
        pod = one(docs, "Deployment", component)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True

    # The profiles ConfigMap is mounted where --profiles points, and the core accepts it;
    # the watcher streams pending pods for exactly those schedulerNames, and the binders
    # bind only those.
    configmap = one(docs, "ConfigMap", "scheduler")
    mounts = {m["name"]: m["mountPath"] for m in container(docs, "scheduler")["volumeMounts"]}
    [key] = configmap["data"]
    assert opts["scheduler"].profiles == f"{mounts['profiles']}/{key}"
    loaded = profiles.load_profiles_yaml(configmap["data"][key])
    watched = {n for part in opts["watcher"].scheduler_names for n in part.split(",")}
    assert watched == set(loaded)
    served = {n for part in opts["binder"].scheduler_names for n in part.split(",")}
    assert served == set(loaded)


# -- the API server validates every object ----------------------------------------------------


def dry_run_create(dyn: dynamic.DynamicClient, doc: Manifest, namespace: str) -> str | None:
    """POST the object with dryRun=All and fieldValidation=Strict; the error, if any."""
    resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    try:
        dyn.create(
            resource,
            body=doc,
            namespace=namespace if resource.namespaced else None,
            dry_run="All",
            query_params=[("fieldValidation", "Strict")],
        )
    except ApiException as exc:
        return f"{doc['kind']}/{doc['metadata']['name']}: {exc.status} {exc.body}"
    return None


@pytest.fixture(scope="module")
def dyn(kube_api: client.ApiClient) -> dynamic.DynamicClient:
    return dynamic.DynamicClient(kube_api)


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_server_side_dry_run_accepts_every_object(
    helm: Path, dyn: dynamic.DynamicClient, namespace: str, value_set: str
) -> None:
    docs = render(helm, release="dry", namespace=namespace, values=VALUE_SETS[value_set])
    checked = [d for d in docs if d["kind"] not in NO_CRD_KINDS]
    skipped = [d for d in docs if d["kind"] in NO_CRD_KINDS]
    assert len(skipped) == (4 if value_set == "all-on" else 0)
    groups = {g.name for g in client.ApisApi(dyn.client).get_api_versions().groups}
    assert "monitoring.coreos.com" not in groups, "the CRD exists now: stop skipping it"

    errors = [e for d in checked if (e := dry_run_create(dyn, d, namespace))]
    assert not errors, "\n".join(errors)
    ha_kinds = {"Role", "RoleBinding"} & {d["kind"] for d in checked}
    assert ha_kinds == ({"Role", "RoleBinding"} if value_set == "all-on" else set())

    # The same path rejects what the API server rejects (so the check above can fail).
    broken = json.loads(json.dumps(one(checked, "Deployment", "binder")))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpcc"] = {}
    assert dry_run_create(dyn, broken, namespace) is not None
    # dryRun: nothing was created.
    assert not client.AppsV1Api(dyn.client).list_namespaced_deployment(namespace).items


# -- helm install, as docs/deploy.md says -----------------------------------------------------


def test_helm_install_and_uninstall_as_documented(
    helm: Path,
    control_plane: ControlPlaneHandle,
    kube_api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """`helm install <release> helm/splitsched --namespace <ns>` against the real API server
    (no --kube-version: helm asks the server), the notes it prints, and `helm uninstall`.
    No controller-manager runs here, so the Deployments get no pods; the objects do exist."""
    labels = tmp_path / "labels.yaml"
    labels.write_text(
        yaml.safe_dump({"global": {"commonLabels": {kube.TEST_NAMESPACE_LABEL: namespace}}})
    )
    release = f"inst-{uuid.uuid4().hex[:6]}"
    run = cluster_helm(helm, control_plane.kubeconfig_path, tmp_path)
    notes = run("install", release, str(CHART), "--namespace", namespace, "-f", str(labels))
    fullname = f"{release}-splitsched"
    assert "schedulerName: splitsched" in notes
    assert f"port-forward svc/{fullname}-scheduler 50050:50050" in notes
    assert "splitsched pods --server localhost:50050 --ca ops-ca.crt" in notes
    assert "WARNING" not in notes

    apps = client.AppsV1Api(kube_api)
    deployments = {d.metadata.name for d in apps.list_namespaced_deployment(namespace).items}
    assert deployments == {f"{fullname}-{c}" for c in COMPONENTS}
    rbac = client.RbacAuthorizationV1Api(kube_api)
    selector = f"app.kubernetes.io/instance={release}"
    assert len(rbac.list_cluster_role(label_selector=selector).items) == 2

    run("uninstall", release, "--namespace", namespace, "--wait")
    assert not rbac.list_cluster_role(label_selector=selector).items
    assert not apps.list_namespaced_deployment(namespace).items


# -- RBAC --------------------------------------------------------------------------------------


def canonical(rules: Sequence[Mapping[str, Any]]) -> list[tuple[tuple[str, ...], ...]]:
    return sorted(
        tuple(tuple(sorted(r.get(k, []))) for k in ("apiGroups", "resources", "verbs"))
        for r in rules
    )


def permissions(rules: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], list[str]]:
    """(apiGroup, resource, verb) -> the resourceNames it is limited to ([] = any name)."""
    granted: dict[tuple[str, str, str], list[str]] = {}
    for rule in rules:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    key = (group, resource, verb)
                    assert key not in granted, f"{key} granted twice"
                    granted[key] = sorted(rule.get("resourceNames", []))
    return granted


def test_chart_rbac_is_exactly_what_each_component_needs(helm: Path) -> None:
    docs = render(helm, values=(CI_VALUES,))
    expected = {"watcher": stack.WATCHER_RULES, "binder": stack.BINDER_RULES}
    for component, rules in expected.items():
        role = one(docs, "ClusterRole", component)
        assert canonical(role["rules"]) == canonical(rules), component
        binding = one(docs, "ClusterRoleBinding", component)
        account = one(docs, "ServiceAccount", component)
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": account["metadata"]["name"],
                "namespace": "splitsched",
            }
        ]
        pod = one(docs, "Deployment", component)["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == account["metadata"]["name"]

    # The scheduler under leader election (all-on): SCHEDULER_RULES in its namespace, with
    # get/update narrowed to its own Lease; create stays unnamed (a create request has no
    # name for resourceNames to match), so it is a rule of its own.
    account = one(docs, "ServiceAccount", "scheduler")
    role, binding = one(docs, "Role", "scheduler"), one(docs, "RoleBinding", "scheduler")
    assert role["metadata"]["namespace"] == "splitsched"
    lease = "splitsched-scheduler"
    granted = permissions(role["rules"])
    assert set(granted) == set(permissions(stack.SCHEDULER_RULES))
    for (_, _, verb), names in granted.items():
        assert names == ([] if verb == "create" else [lease]), (verb, names)
    assert f"--lease-name={lease}" in container(docs, "scheduler")["args"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "splitsched"}
    ]
    # The token is mounted by the pod's choice; the account still opts out by default.
    assert account["automountServiceAccountToken"] is False
    pod = one(docs, "Deployment", "scheduler")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    for component in ("watcher", "binder"):
        assert not find(docs, "Role", component) and not find(docs, "RoleBinding", component)


def test_without_leader_election_the_scheduler_has_no_rbac(helm: Path) -> None:
    docs = render(
        helm,
        values=(CI_VALUES,),
        sets=("scheduler.leaderElection.enabled=false", "scheduler.replicas=1"),
    )
    # The scheduler: a ServiceAccount without any role, and no token in its pod.
    account = one(docs, "ServiceAccount", "scheduler")
    assert account["automountServiceAccountToken"] is False
    pod = one(docs, "Deployment", "scheduler")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert not find(docs, "ClusterRole", "scheduler") and not find(docs, "Role")
    for binding in find(docs, "ClusterRoleBinding") + find(docs, "RoleBinding"):
        subjects = {s["name"] for s in binding["subjects"]}
        assert account["metadata"]["name"] not in subjects, binding["metadata"]["name"]


def token_kubeconfig(admin: client.ApiClient, *, token: str, path: Path) -> Path:
    """A kubeconfig for the admin client's server with a bearer token (CA embedded)."""
    conf = admin.configuration
    cluster: dict[str, Any] = {"server": str(conf.host)}
    if conf.ssl_ca_cert:
        ca_pem = Path(str(conf.ssl_ca_cert)).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "cluster", "cluster": cluster}],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "cluster", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    path.chmod(0o600)
    return path


def create_objects(dyn: dynamic.DynamicClient, docs: Sequence[Manifest], namespace: str) -> None:
    for doc in docs:
        resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        dyn.create(resource, body=doc, namespace=namespace if resource.namespaced else None)


def can(
    api: client.ApiClient, verb: str, resource: str, *, namespace: str = "", name: str = ""
) -> bool:
    """SelfSubjectAccessReview: may this client's identity do ``verb`` on ``resource``
    ("pods", "pods/binding", "events.k8s.io:events"), on the object ``name`` if given?"""
    group, _, rest = resource.rpartition(":")
    plural, _, sub = rest.partition("/")
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "group": group,
                    "resource": plural,
                    "subresource": sub,
                    "verb": verb,
                    "namespace": namespace,
                    "name": name,
                }
            },
        }
    )
    return bool(review.status.allowed)


def forbidden(call: Any) -> bool:
    try:
        call()
    except ApiException as exc:
        return bool(exc.status == 403)
    return False


ChartAccounts = tuple[list[Manifest], dict[str, client.ApiClient], dict[str, Path]]


@contextlib.contextmanager
def created_chart_accounts(
    helm: Path,
    *,
    kube_api: client.ApiClient,
    dyn: dynamic.DynamicClient,
    namespace: str,
    tmp_path: Path,
    sets: Sequence[str] = (),
) -> Iterator[ChartAccounts]:
    """The chart's RBAC objects created for real in ``namespace`` (cluster-scoped ones
    labelled for the namespace fixture's cleanup), with a kubeconfig per ServiceAccount."""
    labels = tmp_path / "labels.yaml"
    labels.write_text(
        yaml.safe_dump({"global": {"commonLabels": {kube.TEST_NAMESPACE_LABEL: namespace}}})
    )
    release = f"rbac-{uuid.uuid4().hex[:6]}"
    docs = render(helm, release=release, namespace=namespace, values=(labels,), sets=sets)
    create_objects(dyn, [d for d in docs if d["kind"] in RBAC_KINDS], namespace)
    core = client.CoreV1Api(kube_api)
    apis: dict[str, client.ApiClient] = {}
    paths: dict[str, Path] = {}
    for component in COMPONENTS:
        name = one(docs, "ServiceAccount", component)["metadata"]["name"]
        token = core.create_namespaced_service_account_token(
            name,
            namespace,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        ).status.token
        paths[component] = token_kubeconfig(
            kube_api, token=str(token), path=tmp_path / f"{component}.kubeconfig"
        )
        apis[component] = kube.api_client_from_kubeconfig(paths[component])
    try:
        yield docs, apis, paths
    finally:
        for api in apis.values():
            api.close()


@pytest.fixture
def chart_accounts(
    helm: Path,
    kube_api: client.ApiClient,
    dyn: dynamic.DynamicClient,
    namespace: str,
    tmp_path: Path,
) -> Iterator[ChartAccounts]:
    """The default chart's RBAC, for real (see `created_chart_accounts`)."""
    with created_chart_accounts(
        helm, kube_api=kube_api, dyn=dyn, namespace=namespace, tmp_path=tmp_path
    ) as accounts:
        yield accounts


@pytest.fixture
def ha_chart_accounts(
    helm: Path,
    kube_api: client.ApiClient,
    dyn: dynamic.DynamicClient,
    namespace: str,
    tmp_path: Path,
) -> Iterator[ChartAccounts]:
    """The chart's RBAC with scheduler leader election on, for real."""
    with created_chart_accounts(
        helm, kube_api=kube_api, dyn=dyn, namespace=namespace, tmp_path=tmp_path, sets=HA_SETS
    ) as accounts:
        yield accounts


def test_chart_service_accounts_have_least_privilege(
    chart_accounts: ChartAccounts,
    namespace: str,
) -> None:
    _, apis, _ = chart_accounts
    ns = namespace
    binder, watcher, scheduler = apis["binder"], apis["watcher"], apis["scheduler"]

    # The binder writes what the scheduler decides, and reads nothing in bulk but the
    # names of the nodes (one list stands for a read of each node a binding names) and a
    # watch of the pending pods (it stands for a read of each pod).
    for verb, resource in [
        ("list", "nodes"),
        ("watch", "pods"),
        ("create", "pods/binding"),
        ("patch", "pods/status"),
        ("get", "pods"),
        ("create", "pods/eviction"),
        ("create", "events"),
        ("create", "events.k8s.io:events"),
        ("patch", "events.k8s.io:events"),
        ("get", "persistentvolumes"),
        ("patch", "persistentvolumes"),
        ("get", "persistentvolumeclaims"),
        ("patch", "persistentvolumeclaims"),
    ]:
        assert can(binder, verb, resource, namespace=ns), f"binder cannot {verb} {resource}"
    for verb, resource in [
        ("list", "secrets"),
        ("get", "secrets"),
        ("list", "pods"),
        ("create", "pods"),
        ("delete", "pods"),
        ("update", "pods"),
        ("watch", "nodes"),
        ("patch", "nodes"),
        ("list", "persistentvolumes"),
        ("create", "persistentvolumes"),
        ("delete", "persistentvolumes"),
        ("update", "persistentvolumes"),
        ("list", "persistentvolumeclaims"),
        ("watch", "persistentvolumeclaims"),
        ("create", "persistentvolumeclaims"),
        ("delete", "persistentvolumeclaims"),
        ("patch", "persistentvolumeclaims/status"),
    ]:
        assert not can(binder, verb, resource, namespace=ns), f"binder may {verb} {resource}"

    # The watcher reads Nodes, Pods, Namespaces, PDBs and storage, and writes nothing.
    for verb in ("get", "list", "watch"):
        for resource in ("pods", "nodes", "namespaces", "policy:poddisruptionbudgets",
                         "persistentvolumeclaims", "persistentvolumes",
                         "storage.k8s.io:storageclasses", "storage.k8s.io:csinodes",
                         "resource.k8s.io:deviceclasses", "resource.k8s.io:resourceslices",
                         "resource.k8s.io:resourceclaims"):  # fmt: skip
            assert can(watcher, verb, resource), f"watcher cannot {verb} {resource}"
    for verb, resource in [
        ("create", "pods/binding"),
        ("patch", "pods/status"),
        ("create", "events"),
        ("delete", "pods"),
        ("list", "secrets"),
        ("list", "configmaps"),
    ]:
        assert not can(watcher, verb, resource, namespace=ns), f"watcher may {verb} {resource}"

    # The scheduler can do nothing with pods (or anything else).
    for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
        for resource in ("pods", "pods/binding", "pods/status", "nodes"):
            assert not can(scheduler, verb, resource, namespace=ns), f"scheduler may {verb}"

    # And the API server itself refuses the calls.
    assert forbidden(lambda: client.CoreV1Api(binder).list_namespaced_secret(ns))
    assert forbidden(lambda: client.CoreV1Api(binder).list_secret_for_all_namespaces())
    assert forbidden(lambda: client.CoreV1Api(binder).list_namespaced_pod(ns))
    assert forbidden(lambda: client.CoreV1Api(scheduler).list_namespaced_pod(ns))
    assert forbidden(lambda: client.CoreV1Api(scheduler).create_namespaced_pod(ns, {}))
    assert forbidden(lambda: client.CoreV1Api(watcher).list_namespaced_secret(ns))
    client.CoreV1Api(watcher).list_pod_for_all_namespaces(limit=1)
    client.CoreV1Api(watcher).list_node(limit=1)


def test_services_schedule_pods_with_the_chart_rbac(
    chart_accounts: ChartAccounts,
    kube_api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    docs, _, kubeconfigs = chart_accounts
    configmap = one(docs, "ConfigMap", "scheduler")
    profiles_path = tmp_path / "profiles.yaml"
    profiles_path.write_text(configmap["data"]["profiles.yaml"])
    watcher_args = [
        a for a in container(docs, "watcher")["args"] if a.startswith("--scheduler-names")
    ]

    nodes = kube.create_kwok_nodes(
        kube_api, 2, name_prefix=f"helm-{uuid.uuid4().hex[:5]}", cpu="4", memory="8Gi"
    )
    running = stack.Stack(
        workdir=tmp_path / "stack",
        watcher_kubeconfig=kubeconfigs["watcher"],
        binder_kubeconfig=kubeconfigs["binder"],
        binders=2,
        watcher_args=watcher_args,
        scheduler_args=["--profiles", str(profiles_path)],
    )
    try:
        with running:
            names = kube.create_pods(
                kube_api, namespace=namespace, pods=kube.make_pods(6, name_prefix="helm")
            )
            core = client.CoreV1Api(kube_api)

            def all_bound() -> bool:
                pods = core.list_namespaced_pod(namespace).items
                return len(pods) == len(names) and all(p.spec.node_name for p in pods)

            kube.wait_for(all_bound, timeout=45, message="pods bound by splitsched")
            placed = {p.spec.node_name for p in core.list_namespaced_pod(namespace).items}
            assert placed <= set(nodes)

            # The binder wrote the Scheduled events too (its events rights suffice).
            def scheduled_events() -> bool:
                events = client.EventsV1Api(kube_api).list_namespaced_event(namespace).items
                return {e.regarding.name for e in events if e.reason == "Scheduled"} >= set(names)

            kube.wait_for(scheduled_events, timeout=20, message="Scheduled events")
            logs = {svc.name: svc.log_path.read_text(errors="replace") for svc in running.services}
        for name, text in logs.items():
            assert "forbidden" not in text.lower(), f"{name} was refused something:\n{text}"
    finally:
        kube.delete_nodes(kube_api, nodes)


def lease_body(name: str, holder: str, *, resource_version: str = "") -> Manifest:
    metadata: Manifest = {"name": name}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 10},
    }


def test_ha_scheduler_token_can_use_its_lease_and_nothing_else(
    ha_chart_accounts: ChartAccounts, kube_api: client.ApiClient, namespace: str
) -> None:
    docs, apis, _ = ha_chart_accounts
    scheduler = apis["scheduler"]
    [lease] = [
        a.split("=", 1)[1]
        for a in container(docs, "scheduler")["args"]
        if a.startswith("--lease-name=")
    ]
    leases = "coordination.k8s.io:leases"
    ns = namespace
    # The API server's RBAC authorizer sees new Roles through an informer: wait for it.
    kube.wait_for(
        lambda: can(scheduler, "update", leases, namespace=ns, name=lease),
        timeout=15,
        message="the scheduler's Role in effect",
    )
    for verb in ("get", "update"):
        assert can(scheduler, verb, leases, namespace=ns, name=lease), f"cannot {verb} {lease}"
        assert not can(scheduler, verb, leases, namespace=ns, name="other"), f"may {verb} other"
    assert can(scheduler, "create", leases, namespace=ns)
    for verb in ("list", "watch", "delete", "patch", "deletecollection"):
        assert not can(scheduler, verb, leases, namespace=ns, name=lease), f"may {verb} leases"
    for other_ns in ("default", "kube-system"):
        for verb in ("get", "create", "update", "list"):
            allowed = can(scheduler, verb, leases, namespace=other_ns, name=lease)
            assert not allowed, f"may {verb} leases in {other_ns}"
    for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
        for resource in ("pods", "pods/binding", "nodes", "secrets", "configmaps"):
            assert not can(scheduler, verb, resource, namespace=ns), f"may {verb} {resource}"

    # The real calls the elector makes (GET, POST, PUT with resourceVersion) succeed...
    coord = client.CoordinationV1Api(scheduler)
    created = coord.create_namespaced_lease(ns, lease_body(lease, "a"))
    read = coord.read_namespaced_lease(lease, ns)
    assert read.spec.holder_identity == "a"
    updated = coord.replace_namespaced_lease(
        lease, ns, lease_body(lease, "b", resource_version=created.metadata.resource_version)
    )
    assert updated.spec.holder_identity == "b"
    # ...and everything else is refused.
    assert forbidden(lambda: coord.list_namespaced_lease(ns))
    assert forbidden(lambda: coord.list_namespaced_lease("default"))
    assert forbidden(lambda: coord.list_lease_for_all_namespaces())
    assert forbidden(lambda: coord.read_namespaced_lease(lease, "kube-system"))
    assert forbidden(lambda: coord.create_namespaced_lease("default", lease_body(lease, "a")))
    assert forbidden(lambda: coord.delete_namespaced_lease(lease, ns))
    assert forbidden(lambda: client.CoreV1Api(scheduler).list_namespaced_pod(ns))
    assert forbidden(lambda: client.CoreV1Api(scheduler).list_pod_for_all_namespaces())
    # The price of create being unnamed (no resourceNames on create): another Lease can be
    # created in the namespace, but then neither read nor renewed.
    coord.create_namespaced_lease(ns, lease_body("other", "a"))
    assert forbidden(lambda: coord.read_namespaced_lease("other", ns))
    holder = client.CoordinationV1Api(kube_api).read_namespaced_lease(lease, ns)
    assert holder.spec.holder_identity == "b"


def test_ha_schedulers_elect_a_leader_and_schedule_with_the_chart_rbac(
    ha_chart_accounts: ChartAccounts,
    kube_api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """Two schedulers with the chart's scheduler token and its election flags (Lease name,
    timings, settle period) share its Lease; the leader schedules."""
    docs, _, kubeconfigs = ha_chart_accounts
    profiles_path = tmp_path / "profiles.yaml"
    profiles_path.write_text(one(docs, "ConfigMap", "scheduler")["data"]["profiles.yaml"])
    election = (
        "--lease-name=",
        "--lease-duration=",
        "--renew-deadline=",
        "--retry-period=",
        "--settle-seconds=",
    )
    chart_args = container(docs, "scheduler")["args"]
    # Not --standby-ready: Stack.wait_leader finds the leader by /readyz.
    election_args = [a for a in chart_args if a.startswith(election)]
    assert len(election_args) == len(election) and "--leader-elect" in chart_args
    [lease] = [a.split("=", 1)[1] for a in election_args if a.startswith("--lease-name=")]

    nodes = kube.create_kwok_nodes(
        kube_api, 2, name_prefix=f"helm-ha-{uuid.uuid4().hex[:5]}", cpu="4", memory="8Gi"
    )
    running = stack.Stack(
        workdir=tmp_path / "stack",
        watcher_kubeconfig=kubeconfigs["watcher"],
        binder_kubeconfig=kubeconfigs["binder"],
        binders=1,
        schedulers=2,
        scheduler_kubeconfig=kubeconfigs["scheduler"],
        lease_namespace=namespace,
        scheduler_args=["--profiles", str(profiles_path), *election_args],
    )
    try:
        with running:
            names = kube.create_pods(
                kube_api, namespace=namespace, pods=kube.make_pods(4, name_prefix="helm-ha")
            )
            core = client.CoreV1Api(kube_api)

            def all_bound() -> bool:
                pods = core.list_namespaced_pod(namespace).items
                return len(pods) == len(names) and all(p.spec.node_name for p in pods)

            kube.wait_for(all_bound, timeout=45, message="pods bound by the HA schedulers")
            held = client.CoordinationV1Api(kube_api).read_namespaced_lease(lease, namespace)
            assert held.spec.holder_identity in {"scheduler-0", "scheduler-1"}
            logs = {svc.name: svc.log_path.read_text(errors="replace") for svc in running.services}
        for name, text in logs.items():
            assert "forbidden" not in text.lower(), f"{name} was refused something:\n{text}"
    finally:
        kube.delete_nodes(kube_api, nodes)


# -- TLS ---------------------------------------------------------------------------------------


def test_tls_values_mount_the_secret_and_render_flags_the_services_accept(
    helm: Path, tmp_path: Path
) -> None:
    """ci/tls-values.yaml: lint passes; every component mounts the Secret and gets server
    flags (scheduler and binder also peer flags) that its own parser and
    `security.from_args` accept once the mount holds real files; readiness is HTTP."""
    lint = run_helm(helm, "lint", str(CHART), *helm_args(values=[TLS_VALUES]))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = render(helm, release="prod", namespace="sched", values=[TLS_VALUES])
    files = tmp_path / "secret"
    issued = certs.write_stack_certs(files)
    (files / "tls.crt").write_bytes(issued["scheduler"].cert_path.read_bytes())
    (files / "tls.key").write_bytes(issued["scheduler"].key_path.read_bytes())
    for component in COMPONENTS:
        main = container(docs, component)
        pod = one(docs, "Deployment", component)["spec"]["template"]["spec"]
        [volume] = [v for v in pod["volumes"] if v["name"] == "tls"]
        assert volume["secret"]["secretName"] == "splitsched-tls"
        [mount] = [m for m in main["volumeMounts"] if m["name"] == "tls"]
        assert mount["readOnly"] is True
        root = mount["mountPath"]
        opts = parsed_options(docs, component)
        assert (opts.tls_cert, opts.tls_key, opts.tls_ca) == (
            f"{root}/tls.crt",
            f"{root}/tls.key",
            f"{root}/ca.crt",
        )
        assert opts.tls_client_auth is True
        assert (
            opts.trusted_clients == "splitsched.sched.svc,spiffe://cluster.local/ns/ops/sa/oncall"
        )
        if component != "watcher":
            assert (opts.peer_tls_ca, opts.peer_tls_cert) == (f"{root}/ca.crt", f"{root}/tls.crt")
            assert opts.peer_server_name == "splitsched.sched.svc"
        assert main["readinessProbe"]["httpGet"]["path"] == "/readyz"
        # The rendered flags, with the mount replaced by real files: the service starts.
        for dest in (
            "tls_cert",
            "tls_key",
            "tls_ca",
            "peer_tls_ca",
            "peer_tls_cert",
            "peer_tls_key",
        ):
            if getattr(opts, dest, None):
                setattr(opts, dest, getattr(opts, dest).replace(root, str(files)))
        sec = security.from_args(opts, service=SERVICES[component])
        assert sec.server is not None and sec.server.require_client_cert
        assert len(sec.interceptors) == 1
        assert (sec.peer is not None) == (component != "watcher")
