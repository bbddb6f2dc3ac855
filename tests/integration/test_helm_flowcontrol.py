"""The chart's API Priority and Fairness objects (issue 22, part 3): a
PriorityLevelConfiguration and a FlowSchema for the binders and another pair for the
watcher, on by default.

* ``helm template``: each FlowSchema takes every request of its component's
  ServiceAccount, in the release's namespace, to its own level (the watcher's LISTs never
  queue behind the binders' writes), ahead of the cluster's ``kube-system-service-accounts``
  (900) and ``service-accounts`` (9000) schemas; the levels carry the values; the
  scheduler gets none; ``flowControl.enabled=false`` renders none;
* on the real API server (APF on, as the local control plane runs): the objects are
  created, and a request made with the binder's and the watcher's tokens is classified by
  the chart's FlowSchema (the ``X-Kubernetes-PF-FlowSchema-UID`` answer header), not by a
  default one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from splitsched.testing import controlplane, kube, serviceaccounts
from tests.support.helm import CHART, Manifest, find, one, render

FLOW_KINDS = ("PriorityLevelConfiguration", "FlowSchema")
#: The cluster's default FlowSchema that takes kube-system's ServiceAccounts (lower wins).
KUBE_SYSTEM_ACCOUNTS_PRECEDENCE = 900
FLOW_SCHEMA_UID = "X-Kubernetes-PF-FlowSchema-UID"
WRITERS = {"binder": "ByNamespace", "watcher": "ByUser"}


@pytest.fixture(scope="module")
def helm() -> Path:
    controlplane.ensure_binaries(("helm",))
    return controlplane.binary_path("helm")


def test_each_component_account_goes_to_a_level_of_its_own(helm: Path) -> None:
    docs = render(helm, release="rel", namespace="sched")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    levels = set()
    for component, distinguisher in WRITERS.items():
        account = one(docs, "ServiceAccount", component)["metadata"]["name"]
        schema = one(docs, "FlowSchema", component)
        level = one(docs, "PriorityLevelConfiguration", component)
        spec = schema["spec"]
        assert spec["priorityLevelConfiguration"]["name"] == level["metadata"]["name"]
        assert spec["matchingPrecedence"] < KUBE_SYSTEM_ACCOUNTS_PRECEDENCE
        assert spec["distinguisherMethod"] == {"type": distinguisher}
        [rule] = spec["rules"]
        assert rule["subjects"] == [
            {"kind": "ServiceAccount", "serviceAccount": {"name": account, "namespace": "sched"}}
        ]
        [resources] = rule["resourceRules"]
        assert resources["verbs"] == ["*"] and resources["resources"] == ["*"]
        assert resources["clusterScope"] is True and resources["namespaces"] == ["*"]
        limited = level["spec"]["limited"]
        wanted = values[component]["flowControl"]
        assert limited["nominalConcurrencyShares"] == wanted["nominalConcurrencyShares"]
        assert limited["lendablePercent"] == wanted["lendablePercent"]
        assert limited["limitResponse"]["queuing"]["queues"] == wanted["queues"]
        levels.add(level["metadata"]["name"])
    assert len(levels) == 2
    assert not any(find(docs, kind, "scheduler") for kind in FLOW_KINDS)

    off = render(
        helm, sets=("binder.flowControl.enabled=false", "watcher.flowControl.enabled=false")
    )
    assert not [d for d in off if d["kind"] in FLOW_KINDS]


@pytest.fixture
def chart_flow_objects(
    helm: Path, kube_api: client.ApiClient, namespace: str
) -> Iterator[tuple[list[Manifest], str]]:
    """The chart's levels and schemas created for real (and deleted after), for a release
    in `namespace`; yields them and the release name."""
    release = f"apf-{uuid.uuid4().hex[:6]}"
    docs = render(helm, release=release, namespace=namespace)
    objects = [d for kind in FLOW_KINDS for d in docs if d["kind"] == kind]
    dyn = dynamic.DynamicClient(kube_api)
    created: list[tuple[dynamic.Resource, str]] = []
    try:
        for doc in objects:
            resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            dyn.create(resource, body=doc)
            created.append((resource, doc["metadata"]["name"]))
        yield docs, release
    finally:
        for resource, name in reversed(created):
            dyn.delete(resource, name=name)


def classified_by(api: client.ApiClient) -> str:
    """The UID of the FlowSchema that classified a request made with `api`'s identity (a
    GET of a node that does not exist: refused or not found, it is classified all the
    same)."""
    try:
        client.CoreV1Api(api).read_node(f"no-such-node-{uuid.uuid4().hex[:6]}")
    except ApiException as exc:
        return str((exc.headers or {}).get(FLOW_SCHEMA_UID, ""))
    raise AssertionError("a node that does not exist was read")


def test_the_api_server_sends_the_components_requests_to_the_charts_levels(
    chart_flow_objects: tuple[list[Manifest], str],
    kube_api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    docs, _ = chart_flow_objects
    flowcontrol = client.FlowcontrolApiserverV1Api(kube_api)
    for component in WRITERS:
        account = one(docs, "ServiceAccount", component)["metadata"]["name"]
        path = serviceaccounts.service_account_kubeconfig(
            kube_api, namespace=namespace, name=account, cluster_role_rules=[],
            directory=tmp_path,
        )  # fmt: skip
        schema = one(docs, "FlowSchema", component)["metadata"]["name"]
        uid = str(flowcontrol.read_flow_schema(schema).metadata.uid)
        api = kube.api_client_from_kubeconfig(path)
        try:
            # The API server's flow-control configuration follows its objects shortly.
            kube.wait_for(
                lambda api=api, uid=uid: classified_by(api) == uid,  # type: ignore[misc]
                timeout=30,
                message=f"{component}'s requests classified by FlowSchema {schema}",
            )
        finally:
            api.close()
    # Another ServiceAccount's requests are not the chart's business.
    other = serviceaccounts.service_account_kubeconfig(
        kube_api, namespace=namespace, name="someone-else", cluster_role_rules=[],
        directory=tmp_path,
    )  # fmt: skip
    api = kube.api_client_from_kubeconfig(other)
    try:
        uids = {str(flowcontrol.read_flow_schema(s).metadata.uid) for s in _schemas(docs)}
        assert classified_by(api) not in uids
    finally:
        api.close()


def _schemas(docs: list[Manifest]) -> list[str]:
    return [d["metadata"]["name"] for d in docs if d["kind"] == "FlowSchema"]
