"""NodePorts: a pod asking for host ports fits only nodes where no counted pod already holds
the same protocol and port on an overlapping address (0.0.0.0 overlaps every address), as
kube-scheduler's nodeports plugin (HostPortInfo.CheckConflict) does.

Built by `splitsched.core.profiles`; run by the framework at PreFilter (skipped for pods
without host ports, which is nearly all of them) and Filter. Only rows that hold any host
port are looked at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, NodeTable, PortKey
from splitsched.core.plugins import basics

REASON = "node(s) didn't have free ports for the requested pod ports"
BIND_ALL = "0.0.0.0"
_PREFILTER_KEY = "PreFilterNodePorts"


def wanted_ports(pod: models.Pod) -> tuple[PortKey, ...]:
    """The pod's host ports as (protocol, host_ip, port), normalised the way the node table
    counts used ports; ports <= 0 never conflict and are dropped."""
    return tuple(
        (hp.protocol or "TCP", hp.host_ip or BIND_ALL, hp.port)
        for hp in pod.host_ports
        if hp.port > 0
    )


def conflicts(used: Mapping[PortKey, int], want: PortKey) -> bool:
    """HostPortInfo.CheckConflict for one wanted port against one node's used ports."""
    protocol, ip, port = want
    if ip == BIND_ALL:
        return any(p == protocol and n == port for p, _, n in used)
    return (protocol, BIND_ALL, port) in used or want in used


class NodePorts(basics.OneReason):
    name: ClassVar[str] = "NodePorts"
    reason: ClassVar[str] = REASON
    resolvable_by_preemption: ClassVar[bool] = True
    events: ClassVar[frozenset[framework.ClusterEvent]] = frozenset(
        {framework.ClusterEvent.NODE_ADD, framework.ClusterEvent.ASSIGNED_POD_DELETE}
    )

    def _wanted(self, state: framework.CycleState, pod: models.Pod) -> tuple[PortKey, ...]:
        cached = state.read(_PREFILTER_KEY)
        if isinstance(cached, tuple):
            return cached
        wanted = wanted_ports(pod)
        state.write(_PREFILTER_KEY, wanted)
        return wanted

    def pre_filter(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable
    ) -> framework.Status:
        if not self._wanted(state, pod):
            return framework.Status.skip()
        return framework.Status.success()

    def filter(self, state: framework.CycleState, pod: models.Pod, table: NodeTable) -> BoolArray:
        mask = np.ones(table.n, dtype=np.bool_)
        wanted = self._wanted(state, pod)
        if not wanted:
            return mask
        for row, used in enumerate(table.used_ports):
            if used and any(conflicts(used, w) for w in wanted):
                mask[row] = False
        return mask
