"""What `splitsched up` checks and grants (`splitsched.up.access`): one review per verb and
resource of the watcher's and the binder's rules, and for what is missing a report and
RBAC that grants exactly the rules the chart gives those two components."""

from __future__ import annotations

import yaml

from splitsched.launch import rights
from splitsched.up import access


def _triples(rules: object) -> set[tuple[str, str, str]]:
    assert isinstance(rules, list | tuple)
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def test_every_verb_and_resource_of_both_components_is_checked_once() -> None:
    wanted = access.needed()
    as_rules = {
        (a.group, f"{a.resource}/{a.subresource}" if a.subresource else a.resource, a.verb)
        for a in wanted
    }
    assert as_rules == _triples(rights.WATCHER_RULES) | _triples(rights.BINDER_RULES)
    assert len(wanted) == len(as_rules)  # no duplicates
    by_key = {(a.group, a.kubectl_resource, a.verb): a.needed_by for a in wanted}
    assert by_key[("", "pods", "get")] == ("watcher", "binder")
    assert by_key[("", "pods/binding", "create")] == ("binder",)
    assert by_key[("policy", "poddisruptionbudgets.policy", "watch")] == ("watcher",)


def test_a_review_asks_about_every_namespace_and_names_the_subresource() -> None:
    binding = access.Access(group="", resource="pods", verb="create", subresource="binding")
    body = access.review(binding)
    assert body["kind"] == "SelfSubjectAccessReview"
    assert body["spec"] == {
        "resourceAttributes": {
            "verb": "create",
            "group": "",
            "resource": "pods",
            "subresource": "binding",
        }
    }
    assert "namespace" not in body["spec"]["resourceAttributes"]
    nodes = access.review(access.Access(group="", resource="nodes", verb="list"))
    assert "subresource" not in nodes["spec"]["resourceAttributes"]


def test_descriptions_read_as_kubectl_auth_can_i_takes_them() -> None:
    events = access.Access(group="events.k8s.io", resource="events", verb="patch",
                           needed_by=("binder",))  # fmt: skip
    assert events.describe() == "patch events.events.k8s.io in all namespaces (binder)"
    pv = access.Access(group="", resource="persistentvolumes", verb="list",
                       needed_by=("watcher", "binder"))  # fmt: skip
    assert pv.describe() == "list persistentvolumes cluster-scoped (watcher, binder)"


def test_the_subject_is_a_service_account_or_a_user() -> None:
    assert access.subject("system:serviceaccount:ops:ci") == {
        "kind": "ServiceAccount",
        "name": "ci",
        "namespace": "ops",
    }
    assert access.subject("kubernetes-admin") == {
        "kind": "User",
        "apiGroup": "rbac.authorization.k8s.io",
        "name": "kubernetes-admin",
    }
    assert access.subject(None)["name"] == access.UNKNOWN_USER


def test_the_rbac_grants_what_the_chart_grants_the_watcher_and_the_binder() -> None:
    role, binding = yaml.safe_load_all(access.grant_yaml("https://issuer.example/#me%40x"))
    assert role["kind"] == "ClusterRole" and role["metadata"]["name"] == access.ROLE_NAME
    assert _triples(role["rules"]) == _triples(rights.WATCHER_RULES) | _triples(rights.BINDER_RULES)
    assert binding["kind"] == "ClusterRoleBinding"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": access.ROLE_NAME,
    }
    assert binding["subjects"] == [access.subject("https://issuer.example/#me%40x")]
    name = binding["metadata"]["name"]
    assert "/" not in name and "%" not in name  # RBAC object names refuse both
    _, sa_binding = yaml.safe_load_all(access.grant_yaml("system:serviceaccount:ops:ci"))
    assert sa_binding["metadata"]["name"] == "splitsched-up:ops:ci"


def test_the_report_lists_what_is_missing_and_says_nothing_started() -> None:
    missing = [a for a in access.needed() if a.needed_by == ("binder",)][:2]
    text = access.report(missing, username="system:serviceaccount:ns:sa", cluster="https://k")
    lines = text.splitlines()
    assert lines[0].startswith("system:serviceaccount:ns:sa may not do everything")
    assert lines[1:3] == [f"  {a.describe()}" for a in missing]
    assert "Nothing was started" in text
    assert f"kubectl auth can-i {missing[0].verb} {missing[0].kubectl_resource} -A" in text
    assert access.UNKNOWN_USER in access.report(missing, username=None, cluster="https://k")
