"""What `splitsched up` must be allowed to do, as values: the rights the watcher and the
binders need (`splitsched.launch.rights`, which the chart grants too) expanded into one
`Access` per verb and resource, the SelfSubjectAccessReview that asks about each, and,
for those the API server denies, the report and the RBAC that would grant them.

The processes `up` starts all use the kubeconfig's identity, so that identity needs the
union of the watcher's and the binder's rules (the scheduler needs none). No I/O here:
`splitsched.up.cluster` sends the reviews.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from splitsched.launch import rights

RBAC_API = "rbac.authorization.k8s.io"
#: The ClusterRole the printed RBAC creates (every right `up` needs: the same for everyone,
#: so applying it again for another user changes nothing) and the prefix of its binding.
ROLE_NAME = "splitsched-up"
#: Stands for the user in the printed RBAC when the API server would not say who it is.
UNKNOWN_USER = "YOUR-USER-NAME"

#: The components `up` runs with the kubeconfig's identity, and the rules each needs.
NEEDS: Mapping[str, Sequence[Mapping[str, Any]]] = {
    "watcher": rights.WATCHER_RULES,
    "binder": rights.BINDER_RULES,
}

#: (group, resource) of the resources the components use that no namespace holds.
CLUSTER_SCOPED = frozenset(
    {
        ("", "nodes"),
        ("", "namespaces"),
        ("", "persistentvolumes"),
        ("storage.k8s.io", "storageclasses"),
        ("storage.k8s.io", "csinodes"),
    }
)


@dataclass(frozen=True, order=True)
class Access:
    """One verb on one resource (``pods/binding`` is resource pods, subresource binding)
    in every namespace, and the components that need it."""

    group: str
    resource: str
    verb: str
    subresource: str = ""
    needed_by: tuple[str, ...] = ()

    @property
    def kubectl_resource(self) -> str:
        """The resource as ``kubectl auth can-i`` takes it: ``pods/binding``,
        ``events.events.k8s.io``, ``poddisruptionbudgets.policy``."""
        name = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{name}/{self.subresource}" if self.subresource else name

    def describe(self) -> str:
        """``create pods/binding in all namespaces (binder)``."""
        cluster_scoped = (self.group, self.resource) in CLUSTER_SCOPED
        scope = "cluster-scoped" if cluster_scoped else "in all namespaces"
        return f"{self.verb} {self.kubectl_resource} {scope} ({', '.join(self.needed_by)})"


def needed(needs: Mapping[str, Sequence[Mapping[str, Any]]] = NEEDS) -> list[Access]:
    """Every (group, resource, verb) the rules of ``needs`` name, once, with the
    components that need it, sorted."""
    by_key: dict[tuple[str, str, str, str], list[str]] = {}
    for component, rules in needs.items():
        for rule in rules:
            for group in rule["apiGroups"]:
                for path in rule["resources"]:
                    resource, _, sub = str(path).partition("/")
                    for verb in rule["verbs"]:
                        who = by_key.setdefault((group, resource, verb, sub), [])
                        if component not in who:
                            who.append(component)
    return sorted(
        Access(group=g, resource=r, verb=v, subresource=s, needed_by=tuple(who))
        for (g, r, v, s), who in by_key.items()
    )


def review(access: Access) -> dict[str, Any]:
    """The SelfSubjectAccessReview asking whether the caller may do ``access`` in every
    namespace (no namespace given: all of them, or the cluster for cluster-scoped ones)."""
    attributes = {"verb": access.verb, "group": access.group, "resource": access.resource}
    if access.subresource:
        attributes["subresource"] = access.subresource
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }


def rules(needs: Mapping[str, Sequence[Mapping[str, Any]]] = NEEDS) -> list[dict[str, Any]]:
    """The PolicyRules of every component in ``needs``, in order, each copied."""
    return [
        {k: list(v) for k, v in rule.items()} for component in needs.values() for rule in component
    ]


def subject(username: str | None) -> dict[str, str]:
    """The RBAC subject for a user name as SelfSubjectReview reports it: a ServiceAccount
    for ``system:serviceaccount:NS:NAME``, else a User (UNKNOWN_USER when unknown)."""
    prefix = "system:serviceaccount:"
    if username and username.startswith(prefix):
        namespace, _, name = username.removeprefix(prefix).partition(":")
        return {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    return {"kind": "User", "apiGroup": RBAC_API, "name": username or UNKNOWN_USER}


def grant(username: str | None) -> list[dict[str, Any]]:
    """The ClusterRole with every right `up` needs and the ClusterRoleBinding giving it to
    ``username``."""
    who = subject(username)
    owner = ":".join(filter(None, (who.get("namespace"), who["name"])))
    # RBAC names may hold anything but '/' and '%' (an OIDC user name may be a URL).
    binding_name = f"{ROLE_NAME}:{owner.replace('/', '-').replace('%', '-')}"
    return [
        {
            "apiVersion": f"{RBAC_API}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": ROLE_NAME},
            "rules": rules(),
        },
        {
            "apiVersion": f"{RBAC_API}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding_name},
            "roleRef": {"apiGroup": RBAC_API, "kind": "ClusterRole", "name": ROLE_NAME},
            "subjects": [who],
        },
    ]


def grant_yaml(username: str | None) -> str:
    """`grant` as one YAML stream, for ``kubectl apply -f -``."""
    return yaml.safe_dump_all(grant(username), sort_keys=False, default_flow_style=None)


def report(missing: Sequence[Access], *, username: str | None, cluster: str) -> str:
    """What the user reads when rights are missing: which, for whom, and how to grant
    them (the YAML itself goes to stdout, `grant_yaml`)."""
    lines = [
        f"{username or 'this identity'} may not do everything splitsched up needs on "
        f"{cluster}; missing:"
    ]
    lines += [f"  {a.describe()}" for a in missing]
    first = missing[0] if missing else None
    if first is not None:
        lines.append(f"(check one: kubectl auth can-i {first.verb} {first.kubectl_resource} -A)")
    lines += [
        "",
        "Nothing was started. A cluster admin can grant them with the RBAC printed on",
        f"stdout (ClusterRole {ROLE_NAME}: every right the watcher and the binders need):",
        "  splitsched up ... 2>/dev/null > splitsched-up-rbac.yaml",
        "  kubectl --context ADMIN-CONTEXT apply -f splitsched-up-rbac.yaml",
    ]
    if not username:
        lines.append(f"(the API server did not say who you are: replace {UNKNOWN_USER})")
    return "\n".join(lines)
