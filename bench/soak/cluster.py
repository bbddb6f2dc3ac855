"""What a soak runs on: a local control plane with the workload controllers beside it,
the kwok nodes (a general pool for the churn, a pool for the preemption rounds), the
PriorityClasses, one fault proxy in front of the watcher and one in front of the binders
(the watcher's watches are cut through it; the binders' log counts Bindings per pod), and
the services: a watcher, 2 binders and 2 schedulers under leader election, bin-packing.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client

from splitsched.testing import controlplane, faultproxy, kube, manifests, mixedload, stack
from splitsched.testing.workloadcontrollers import WorkloadControllers

#: The general pool's nodes, as in the fault tier: 4 CPUs.
NODE_CPU = "4"
NODE_MEMORY = "16Gi"
POOL_LABEL = "soak-pool"
#: The preemption rounds' workload (``mixedload``): 12 of the nodes, 131 pods a round.
ROUND_PLAN = mixedload.Plan(
    full_nodes=6, free_nodes=6, high=8, mid=4, polite=3, gangs=3, gang_size=6,
    big_gang=7, short_gang=3, plain=40,
)  # fmt: skip


@dataclass
class Cluster:
    """Everything a soak started; ``close()`` stops it all, the control plane last."""

    workdir: Path
    nodes: int
    keep: bool = False
    #: The watcher's --ring-size (0: its default).
    ring_size: int = 0
    run_id: str = ""
    cp: controlplane.ControlPlane | None = None
    controllers: WorkloadControllers | None = None
    api: client.ApiClient | None = None
    general: list[str] = field(default_factory=list)
    pool: mixedload.Pool | None = None
    classes: dict[str, str] = field(default_factory=dict)
    namespace: str = ""
    proxies: dict[str, faultproxy.FaultProxy] = field(default_factory=dict)
    services: stack.RestartableStack | None = None
    profiles: Path | None = None

    @property
    def admin(self) -> client.ApiClient:
        assert self.api is not None, "cluster not up"
        return self.api

    @property
    def stack(self) -> stack.RestartableStack:
        assert self.services is not None, "services not started"
        return self.services

    def up(self, progress: object = print) -> Cluster:
        """Start everything in order; on failure stop what was started."""
        say = progress if callable(progress) else print
        try:
            self._control_plane()
            say(f"control plane up ({self.workdir / 'cluster'}), workload controllers too")
            self._nodes()
            say(f"{len(self.general)} general + {len(self.pool.nodes) if self.pool else 0} "
                "preemption-pool kwok nodes Ready")  # fmt: skip
            self._services()
            say("watcher, 2 binders, 2 schedulers up (one leads)")
        except BaseException:
            self.close()
            raise
        return self

    def _control_plane(self) -> None:
        self.cp = controlplane.ControlPlane(self.workdir / "cluster", die_with_parent=True)
        self.cp.up()
        self.controllers = WorkloadControllers(self.cp)
        self.controllers.start()
        self.api = kube.api_client_from_kubeconfig(self.cp.kubeconfig_path)
        self.run_id = self.run_id or "soak"

    def _nodes(self) -> None:
        count = self.nodes - ROUND_PLAN.full_nodes - ROUND_PLAN.free_nodes
        self.general = kube.create_kwok_nodes(
            self.admin, count, name_prefix="soak-g", cpu=NODE_CPU, memory=NODE_MEMORY,
            pods=110, labels={POOL_LABEL: "general"}, workers=16, timeout=max(120.0, count / 2),
        )  # fmt: skip
        self.pool = mixedload.create_pool(self.admin, ROUND_PLAN)
        self.classes = mixedload.create_priority_classes(self.admin)
        self.namespace = kube.create_namespace(self.admin, prefix="soak")

    def _services(self) -> None:
        configs = stack.component_kubeconfigs(
            self.admin,
            namespace=kube.create_namespace(self.admin, prefix="splitsched"),
            directory=self.workdir / "sa",
            with_scheduler=True,
        )
        lease_ns = kube.create_namespace(self.admin, prefix="soak-lease")
        proxied = {}
        for component in ("watcher", "binder"):
            proxy = faultproxy.FaultProxy.for_kubeconfig(
                configs[component], seed=1, name=f"proxy-{component}"
            )
            self.proxies[component] = proxy.start()
            proxied[component] = faultproxy.proxied_kubeconfig(
                configs[component], proxy_url=proxy.url,
                dest=self.workdir / f"{component}-proxied.kubeconfig",
            )  # fmt: skip
        self.profiles = self.workdir / "bin-packing.yaml"
        self.profiles.write_text(yaml.safe_dump(manifests.BIN_PACKING_PROFILE))
        self.services = stack.RestartableStack(
            workdir=self.workdir / "services",
            watcher_kubeconfig=proxied["watcher"],
            binder_kubeconfig=proxied["binder"],
            binders=2,
            schedulers=2,
            scheduler_kubeconfig=configs["scheduler"],
            lease_namespace=lease_ns,
            scheduler_args=["--profiles", str(self.profiles)],
            watcher_args=["--ring-size", str(self.ring_size)] if self.ring_size else [],
        )
        self.services.start(timeout=120)

    def close(self) -> None:
        """Stop the services, the proxies, the workload controllers, the control plane."""
        if self.services is not None:
            self.services.stop()
        for proxy in self.proxies.values():
            with contextlib.suppress(Exception):
                proxy.stop()
        if self.api is not None:
            self.api.close()
        if self.controllers is not None:
            self.controllers.stop()
        if self.cp is not None:
            self.cp.down()
        if not self.keep:
            shutil.rmtree(self.workdir / "cluster", ignore_errors=True)


def new_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="splitsched-soak-"))
