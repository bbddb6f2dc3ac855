"""NodePorts: host port conflicts by protocol, port and overlapping host IP."""

from __future__ import annotations

from splitsched.core import framework, models
from splitsched.core.plugins.node_ports import REASON, NodePorts
from tests.support.builders import bools, container, fresh_state, node, pod, table_of

HP = models.HostPort


def with_ports(
    *ports: models.HostPort, sidecar_ports: tuple[models.HostPort, ...] = ()
) -> models.Pod:
    inits = (
        [container(name="side", sidecar=True, host_ports=sidecar_ports)] if sidecar_ports else []
    )
    return pod(containers=[container(host_ports=ports)], init_containers=inits)


def run(p: models.Pod, existing: list[models.Pod]) -> list[bool]:
    table = table_of([node("busy"), node("free")], assigned={"busy": existing})
    state = fresh_state()
    plugin = NodePorts()
    status = plugin.pre_filter(state, p, table)
    if status.code == framework.Code.SKIP:
        return [True] * table.n
    return bools(plugin.filter(state, p, table))


def test_pod_without_host_ports_skips() -> None:
    table = table_of([node("n")])
    assert NodePorts().pre_filter(fresh_state(), pod(), table).code == framework.Code.SKIP
    zero = with_ports(HP(0))
    assert NodePorts().pre_filter(fresh_state(), zero, table).code == framework.Code.SKIP


def test_same_port_same_protocol_conflicts() -> None:
    assert run(with_ports(HP(8080)), [with_ports(HP(8080))]) == [False, True]


def test_other_port_or_protocol_does_not_conflict() -> None:
    assert run(with_ports(HP(8081)), [with_ports(HP(8080))]) == [True, True]
    assert run(with_ports(HP(8080, "UDP")), [with_ports(HP(8080, "TCP"))]) == [True, True]
    assert run(with_ports(HP(8080, "UDP")), [with_ports(HP(8080, "UDP"))]) == [False, True]


def test_empty_protocol_means_tcp() -> None:
    assert run(with_ports(HP(8080, "")), [with_ports(HP(8080, "TCP"))]) == [False, True]


def test_distinct_host_ips_do_not_conflict() -> None:
    used = [with_ports(HP(8080, "TCP", "127.0.0.1"))]
    assert run(with_ports(HP(8080, "TCP", "127.0.0.2")), used) == [True, True]
    assert run(with_ports(HP(8080, "TCP", "127.0.0.1")), used) == [False, True]


def test_wildcard_ip_conflicts_with_any_ip_both_ways() -> None:
    specific = [with_ports(HP(8080, "TCP", "10.0.0.1"))]
    assert run(with_ports(HP(8080, "TCP", "0.0.0.0")), specific) == [False, True]
    assert run(with_ports(HP(8080, "TCP", "")), specific) == [False, True]
    wildcard = [with_ports(HP(8080, "TCP", ""))]
    assert run(with_ports(HP(8080, "TCP", "10.0.0.1")), wildcard) == [False, True]
    assert run(with_ports(HP(8080, "UDP", "10.0.0.1")), wildcard) == [True, True]


def test_any_of_several_ports_conflicting_rejects() -> None:
    used = [with_ports(HP(9000), HP(9001, "UDP"))]
    assert run(with_ports(HP(1000), HP(9001, "UDP")), used) == [False, True]


def test_sidecar_ports_count() -> None:
    used = [with_ports(sidecar_ports=(HP(7000),))]
    assert run(with_ports(HP(7000)), used) == [False, True]
    assert run(with_ports(sidecar_ports=(HP(7000),)), used) == [False, True]


def test_port_freed_when_pod_removed() -> None:
    holder = with_ports(HP(8080))
    table = table_of([node("n")], assigned={"n": [holder]})
    p = with_ports(HP(8080))
    assert NodePorts().filter(fresh_state(), p, table).tolist() == [False]
    table.remove_pod("n", holder.uid)
    assert NodePorts().filter(fresh_state(), p, table).tolist() == [True]


def test_reason_and_declarations() -> None:
    table = table_of([node("n")])
    reasons = NodePorts().failure_reasons(fresh_state(), with_ports(HP(1)), table, [0])
    assert reasons == [("node(s) didn't have free ports for the requested pod ports",)]
    assert reasons[0][0] == REASON
    assert NodePorts.resolvable_by_preemption is True
    assert framework.ClusterEvent.ASSIGNED_POD_DELETE in NodePorts.events
