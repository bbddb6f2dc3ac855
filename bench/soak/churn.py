"""The everyday churn of a soak, on the general pool: Deployments scaled up and down and
now and then rolled out, Jobs whose pods complete (kwok's ``pod-complete`` stage), bare
pods deleted while they are being scheduled and bound, small gangs, and nodes added,
cordoned, drained and deleted. Each action runs on its own period; ``Churn.step`` runs
those that are due, from one thread, with a seeded random source.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from bench.soak.cluster import NODE_CPU, NODE_MEMORY, POOL_LABEL
from splitsched.core import convert
from splitsched.testing import kube

Json = dict[str, Any]
DEPLOYMENTS = 6
MAX_REPLICAS = 24
#: Seconds between runs of each action.
PERIODS = {
    "scale": 6.0,
    "rollout": 60.0,
    "job": 10.0,
    "mid_bind": 8.0,
    "gang": 40.0,
    "reap": 15.0,
    "nodes": 30.0,
}
#: Bare pods and finished Jobs are deleted this long after they were made.
BARE_LIFETIME = 60.0
CHURN_LABEL = "soak-churn"


def _template(app: str, *, restart: str = "Always", cpu: str = "200m") -> Json:
    pod = kube.make_pod(app, cpu=cpu, memory="64Mi", node_selector={POOL_LABEL: "general"})
    pod["metadata"] = {"labels": {"app": app, CHURN_LABEL: app.rsplit("-", 1)[0]}}
    pod["spec"]["restartPolicy"] = restart
    return {"metadata": pod["metadata"], "spec": pod["spec"]}


def deployment(name: str, replicas: int) -> Json:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": _template(name),
        },
    }


def job(name: str) -> Json:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": 4,
            "parallelism": 4,
            "backoffLimit": 2,
            "template": _template(name, restart="Never", cpu="100m"),
        },
    }


@dataclass
class Churn:
    api: client.ApiClient
    namespace: str
    nodes: list[str]
    seed: int = 1
    done: Counter[str] = field(default_factory=Counter)
    _last: dict[str, float] = field(default_factory=dict)
    _bare: dict[str, float] = field(default_factory=dict)
    _jobs: dict[str, float] = field(default_factory=dict)
    _cordoned: list[str] = field(default_factory=list)
    _serial: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)

    def start(self) -> None:
        """The Deployments, at a random size each."""
        for i in range(DEPLOYMENTS):
            body = deployment(f"deploy-{i}", self.rng.randint(2, MAX_REPLICAS // 2))
            self.apps.create_namespaced_deployment(self.namespace, body)

    def step(self) -> None:
        """Run every action whose period has passed since it last ran."""
        actions: dict[str, Callable[[], None]] = {
            "scale": self.scale, "rollout": self.rollout, "job": self.run_job,
            "mid_bind": self.delete_mid_bind, "gang": self.gang, "reap": self.reap,
            "nodes": self.node_cycle,
        }  # fmt: skip
        now = time.monotonic()
        for name, action in actions.items():
            if now - self._last.get(name, 0.0) >= PERIODS[name]:
                self._last[name] = now
                action()
                self.done[name] += 1

    def _name(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}-{self._serial}"

    # -- the actions ---------------------------------------------------------------------

    def scale(self) -> None:
        name = f"deploy-{self.rng.randrange(DEPLOYMENTS)}"
        body = {"spec": {"replicas": self.rng.randint(0, MAX_REPLICAS)}}
        self.apps.patch_namespaced_deployment_scale(name, self.namespace, body)

    def rollout(self) -> None:
        """A new ReplicaSet: the Deployment replaces its pods a quarter at a time."""
        name = f"deploy-{self.rng.randrange(DEPLOYMENTS)}"
        stamp = {"soak/rollout": str(self._serial)}
        self._serial += 1
        body = {"spec": {"template": {"metadata": {"annotations": stamp}}}}
        self.apps.patch_namespaced_deployment(name, self.namespace, body)

    def run_job(self) -> None:
        name = self._name("job")
        self.batch.create_namespaced_job(self.namespace, job(name))
        self._jobs[name] = time.monotonic()

    def delete_mid_bind(self) -> None:
        """Eight bare pods, half of them deleted within 0.3 s: while the scheduler decides
        or a binder binds them."""
        names = [self._name("bare") for _ in range(8)]
        for name in names:
            pod = kube.make_pod(name, cpu="100m", memory="32Mi",
                                node_selector={POOL_LABEL: "general"})  # fmt: skip
            self.core.create_namespaced_pod(self.namespace, pod)
            self._bare[name] = time.monotonic()
        time.sleep(self.rng.uniform(0.0, 0.3))
        for name in self.rng.sample(names, 4):
            self._delete_pod(self.namespace, name)
            self._bare.pop(name, None)

    def gang(self) -> None:
        """Four pods placed all or nothing."""
        group = self._name("gang")
        for i in range(4):
            pod = kube.make_pod(f"{group}-{i}", cpu="250m", memory="32Mi",
                                node_selector={POOL_LABEL: "general"})  # fmt: skip
            pod["metadata"]["annotations"] = {
                convert.GROUP_ANNOTATION: group,
                convert.MIN_MEMBER_ANNOTATION: "4",
            }
            self.core.create_namespaced_pod(self.namespace, pod)
            self._bare[pod["metadata"]["name"]] = time.monotonic()

    def reap(self) -> None:
        """Delete bare pods and Jobs (their pods with them) older than ``BARE_LIFETIME``."""
        old = time.monotonic() - BARE_LIFETIME
        for name in [n for n, t in self._bare.items() if t < old]:
            self._delete_pod(self.namespace, name)
            del self._bare[name]
        for name in [n for n, t in self._jobs.items() if t < old]:
            try:
                self.batch.delete_namespaced_job(
                    name, self.namespace, propagation_policy="Background"
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
            del self._jobs[name]

    def node_cycle(self) -> None:
        """Drain and delete the node cordoned last time, cordon another, add a new one."""
        if self._cordoned:
            gone = self._cordoned.pop(0)
            self.drain(gone)
            kube.delete_nodes(self.api, [gone])
            self.nodes.remove(gone)
        victim = self.rng.choice([n for n in self.nodes if n not in self._cordoned])
        self.core.patch_node(victim, {"spec": {"unschedulable": True}})
        self._cordoned.append(victim)
        added = kube.create_kwok_nodes(
            self.api, 1, name_prefix=self._name("soak-x"), cpu=NODE_CPU, memory=NODE_MEMORY,
            pods=110, labels={POOL_LABEL: "general"}, timeout=60.0,
        )  # fmt: skip
        self.nodes.extend(added)

    def drain(self, node: str) -> None:
        """Delete every pod on ``node`` (their controllers make new ones elsewhere)."""
        pods = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
        for pod in pods.items:
            self._delete_pod(pod.metadata.namespace, pod.metadata.name)
            self._bare.pop(pod.metadata.name, None)

    def _delete_pod(self, namespace: str, name: str) -> None:
        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise
