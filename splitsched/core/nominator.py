"""Nominated pods: pending pods that a preemption nominated to a node (their
`status.nominatedNodeName`), whose room the filter keeps for them.

kube-scheduler's nominator (pkg/scheduler/backend/queue/nominator.go) and
RunFilterPluginsWithNominatedPods: a pod is filtered on a node as if every pod nominated
there with an equal or higher priority were already running on it, so a lower or equal
priority pod does not take the room a preemption freed (a higher-priority one may).
The scheduler service feeds this from the watch (pending pods with a nominated node) and
from its own preemption decisions; `splitsched.core.algorithm` reads it. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from splitsched.core import models


def interacts(pod: models.Pod) -> bool:
    """Whether anything besides its requests makes a pod matter to, or depend on, other
    pods on a node: host ports, inter-pod (anti-)affinity, topology spread constraints."""
    return bool(
        pod.host_ports
        or pod.pod_affinity is not None
        or pod.pod_anti_affinity is not None
        or pod.topology_spread_constraints
    )


class Nominator:
    """Pods nominated to nodes, by node. Each pod is held as if it ran on its node
    (`node_name` set), ready to be counted on that node's row for a filter pass."""

    __slots__ = ("_by_node", "_node_of", "interacting")

    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        self._by_node: dict[str, dict[str, models.Pod]] = {}
        #: Uids of nominated pods for which `interacts` holds.
        self.interacting: set[str] = set()

    def add(self, pod: models.Pod, node: str) -> None:
        """Nominate `pod` to `node` (replacing an earlier nomination of the same uid)."""
        if not node:
            self.remove(pod.uid)
            return
        self.remove(pod.uid)
        placed = pod if pod.node_name == node else dataclasses.replace(pod, node_name=node)
        self._node_of[pod.uid] = node
        self._by_node.setdefault(node, {})[pod.uid] = placed
        if interacts(pod):
            self.interacting.add(pod.uid)

    def remove(self, uid: str) -> str:
        """Drop the pod's nomination; returns the node it was nominated to ("" if none)."""
        node = self._node_of.pop(uid, "")
        self.interacting.discard(uid)
        if node:
            pods = self._by_node[node]
            del pods[uid]
            if not pods:
                del self._by_node[node]
        return node

    def node_of(self, uid: str) -> str:
        return self._node_of.get(uid, "")

    def by_node(self) -> Iterator[tuple[str, dict[str, models.Pod]]]:
        """(node name, {uid: pod}) for every node with at least one nominated pod."""
        return iter(self._by_node.items())

    def clear(self) -> None:
        self._node_of.clear()
        self._by_node.clear()
        self.interacting.clear()

    def __len__(self) -> int:
        return len(self._node_of)

    def __contains__(self, uid: object) -> bool:
        return uid in self._node_of
