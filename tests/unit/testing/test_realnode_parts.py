"""The real-node tier's pure parts: its configs, the host record and its comparison, the
control plane's real-node mode command lines. (The tier itself: tests/realnode.)"""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from splitsched.testing.controlplane import components
from splitsched.testing.controlplane.state import ControlPlaneState
from splitsched.testing.realnode import configs, host, network, packages
from splitsched.testing.realnode.layout import NodeLayout
from splitsched.testing.realnode.teardown import _jump_target

LAYOUT = NodeLayout(state_dir=Path("/srv/rn"))


def test_the_bridge_address_is_the_first_of_the_pod_subnet() -> None:
    assert LAYOUT.bridge_ip == "10.85.0.1"
    assert replace(LAYOUT, pod_subnet="10.9.8.0/26").bridge_ip == "10.9.8.1"


def test_containerd_is_private_and_fits_this_vm() -> None:
    config = tomllib.loads(configs.containerd_config(LAYOUT))
    assert config["root"].startswith("/srv/rn/") and config["state"].startswith("/srv/rn/")
    assert config["grpc"]["address"] == str(LAYOUT.containerd_socket)
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True  # no CAP_SYS_RESOURCE here
    assert cri["sandbox_image"] == configs.PAUSE_IMAGE
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert cri["cni"]["conf_dir"] == str(LAYOUT.cni_conf_dir)


def test_the_cni_network_never_masquerades() -> None:
    plugins = json.loads(configs.cni_conflist(LAYOUT))["plugins"]
    bridge = plugins[0]
    assert bridge["bridge"] == LAYOUT.bridge and bridge["ipMasq"] is False
    assert bridge["ipam"]["dataDir"].startswith("/srv/rn/")
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.85.0.0/24", "gateway": "10.85.0.1"}]]
    assert [p["type"] for p in plugins] == ["bridge", "portmap"]


def test_the_kubelet_serves_on_the_bridge_and_asks_the_api_server_who_may_call() -> None:
    config = yaml.safe_load(
        configs.kubelet_config(LAYOUT, client_ca=Path("/ca.crt"), resolv_conf=Path("/r"))
    )
    assert config["address"] == LAYOUT.bridge_ip and config["readOnlyPort"] == 0
    assert config["cgroupDriver"] == "cgroupfs" and config["failCgroupV1"] is False
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authentication"]["webhook"]["enabled"] is True
    assert config["authorization"]["mode"] == "Webhook"
    assert config["clusterDNS"] == [LAYOUT.bridge_ip]
    assert config["containerRuntimeEndpoint"] == f"unix://{LAYOUT.containerd_socket}"


def test_kube_proxy_changes_no_conntrack_sysctl_and_opens_node_ports_on_the_bridge() -> None:
    config = yaml.safe_load(configs.kube_proxy_config(LAYOUT, kubeconfig=Path("/k")))
    assert config["mode"] == "iptables"
    assert config["conntrack"]["maxPerCore"] == 0 and config["conntrack"]["min"] == 0
    assert config["nodePortAddresses"] == ["10.85.0.1/32"]
    assert config["iptables"]["localhostNodePorts"] is False


def test_coredns_answers_cluster_names_only_and_forwards_nothing() -> None:
    corefile = configs.corefile(LAYOUT, kubeconfig=Path("/k"))
    assert "forward" not in corefile
    assert corefile.count("bind 10.85.0.1") == 2
    assert "kubernetes cluster.local" in corefile


def test_the_guard_keeps_forwarded_packets_inside_the_bridge() -> None:
    rules = network.guard_rules(LAYOUT)
    assert rules[0] == ["-i", "ssched0", "-o", "ssched0", "-j", "ACCEPT"]
    assert {tuple(r) for r in rules[1:]} == {
        ("-i", "ssched0", "-j", "DROP"),
        ("-o", "ssched0", "-j", "DROP"),
    }


SAVE = """*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
COMMIT
*filter
:FORWARD DROP [0:0]
:INPUT ACCEPT [0:0]
COMMIT
"""


def test_iptables_save_becomes_chains_policies_and_rules() -> None:
    assert host.parse_save("v4", SAVE) == {
        "v4 nat chain KUBE-SERVICES",
        "v4 filter policy FORWARD DROP",
        'v4 nat rule -A PREROUTING -m comment --comment "kubernetes service portals" '
        "-j KUBE-SERVICES",
    }
    assert _jump_target(["PREROUTING", "-j", "KUBE-SERVICES"]) == "KUBE-SERVICES"
    assert _jump_target(["PREROUTING", "-s", "1.2.3.4"]) is None


def test_differences_name_what_was_left_and_what_was_lost(tmp_path: Path) -> None:
    before = host.HostSnapshot(
        sysctls={"kernel/panic": "1"}, links=frozenset({"lo"}), paths=frozenset({"/x"})
    )
    after = host.HostSnapshot(
        sysctls={"kernel/panic": "10"},
        links=frozenset({"lo", "ssched0"}),
        iptables=frozenset({"v4 nat chain KUBE-SERVICES"}),
    )
    assert host.differences(before, before) == []
    assert host.differences(before, after) == [
        "sysctl kernel/panic: 1 before, 10 after",
        "iptables left behind: v4 nat chain KUBE-SERVICES",
        "network link left behind: ssched0",
        "path gone: /x",
    ]
    host.save(after, tmp_path / "h.json")
    assert host.load(tmp_path / "h.json") == after
    (tmp_path / "old.json").write_text('{"sysctls": {}}')
    assert host.load(tmp_path / "old.json") is None


def test_real_node_mode_serves_on_the_bridge_and_reaches_kubelets() -> None:
    state = ControlPlaneState(1, 2, 3, 4, address="10.85.0.1", controller_manager_port=5)
    assert state.real_node and state.server_url == "https://10.85.0.1:3"
    assert "kube-controller-manager" in state.components
    argv = components.apiserver_argv(Path("/kas"), state, pki=Path("/pki"))
    assert "--bind-address=10.85.0.1" in argv
    assert "--disable-admission-plugins=TaintNodesByCondition" in argv  # ServiceAccount on
    assert "--kubelet-client-certificate=/pki/kubelet-client.crt" in argv
    loopback = ControlPlaneState(1, 2, 3, 4)
    assert not loopback.real_node and "kube-scheduler" not in loopback.components
    assert "kube-scheduler" in state.components
    plain = components.apiserver_argv(Path("/kas"), loopback, pki=Path("/pki"))
    assert "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition" in plain
    kcm = components.controller_manager_argv(
        Path("/kcm"), state, pki=Path("/pki"), kubeconfig=Path("/k")
    )
    assert "--secure-port=5" in kcm and "--root-ca-file=/pki/ca.crt" in kcm
    # The PV binder and the disruption controller always; Deployments only on a real node.
    assert {"persistentvolume-binder-controller", "disruption-controller"} <= set(
        components.controllers(loopback)
    )
    assert "deployment-controller" not in components.controllers(loopback)
    assert "deployment-controller" in components.controllers(state)


def test_the_tier_says_why_it_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert "needs root" in str(packages.why_unusable())
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr("shutil.which", lambda name: None)  # no apt-get either
    monkeypatch.setattr("pathlib.Path.exists", lambda self: False)
    reason = str(packages.why_unusable())
    assert reason.startswith("Debian packages missing and not installable here: containerd")
    assert "containernetworking-plugins" in reason and "podman" in reason
