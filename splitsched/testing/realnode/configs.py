"""The real node's configuration files, as pure functions of a ``NodeLayout``: containerd's
config, the CNI network, the kubelet's and kube-proxy's configuration, CoreDNS's Corefile.
Each setting that this VM needs, or that keeps the host as it was, says why."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from splitsched.testing.realnode.layout import NodeLayout

#: The sandbox image: our own pause (deploy/pause), built locally, never pulled.
PAUSE_IMAGE = "localhost/splitsched-pause:1.0"
CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
CNI_NETWORK = "splitsched"


def containerd_config(layout: NodeLayout, *, runc: str = "/usr/sbin/runc") -> str:
    """containerd 1.6 (config version 2) with a private root, state and socket."""
    d = layout.containerd_dir
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{d / "root"}"
state = "{d / "state"}"
[grpc]
  address = "{layout.containerd_socket}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "opt"}"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  # This VM has no CAP_SYS_RESOURCE: without this every sandbox fails with
  # "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  enable_selinux = false
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  BinaryName = "{runc}"
  # The kubelet runs with the cgroupfs driver: there is no systemd here.
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{layout.cni_conf_dir}"
"""


def cni_conflist(layout: NodeLayout) -> str:
    """A bridge with host-local addresses and portmap. No IP masquerading: pods reach the
    node and each other, and nothing leaves the machine (``network.ForwardGuard``)."""
    bridge = {
        "type": "bridge",
        "bridge": layout.bridge,
        "isGateway": True,
        "isDefaultGateway": True,
        "ipMasq": False,
        "hairpinMode": True,
        "ipam": {
            "type": "host-local",
            "dataDir": str(layout.cni_ipam_dir),
            "ranges": [[{"subnet": layout.pod_subnet, "gateway": layout.bridge_ip}]],
        },
    }
    portmap = {"type": "portmap", "capabilities": {"portMappings": True}}
    doc = {"cniVersion": "0.4.0", "name": CNI_NETWORK, "plugins": [bridge, portmap]}
    return json.dumps(doc, indent=2) + "\n"


def kubelet_config(layout: NodeLayout, *, client_ca: Path, resolv_conf: Path) -> str:
    """KubeletConfiguration: serves only on the bridge, authenticates and authorizes
    requests through the API server (``kubectl logs``/``exec``), uses cgroupfs."""
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": layout.bridge_ip,
        "port": layout.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": layout.kubelet_healthz_port,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        # The host is a cgroup v1/v2 hybrid.
        "failCgroupV1": False,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [layout.bridge_ip],
        "clusterDomain": layout.cluster_domain,
        # No upstream resolvers in pods: nothing leaves the machine.
        "resolvConf": str(resolv_conf),
        "podLogsDir": str(layout.pod_logs_dir),
        "serializeImagePulls": False,
        "maxPods": 40,
        # A shared development disk: evict on real exhaustion only.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "rotateCertificates": False,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(layout: NodeLayout, *, kubeconfig: Path) -> str:
    """iptables mode. The conntrack settings are zeroed so kube-proxy changes no host
    sysctl; NodePorts open only on the bridge address."""
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "hostnameOverride": layout.node_name,
        "bindAddress": layout.bridge_ip,
        "healthzBindAddress": f"127.0.0.1:{layout.proxy_healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{layout.proxy_metrics_port}",
        "clusterCIDR": layout.pod_subnet,
        "nodePortAddresses": [f"{layout.bridge_ip}/32"],
        "iptables": {"masqueradeAll": False, "localhostNodePorts": False},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    return yaml.safe_dump(config, sort_keys=False)


def corefile(layout: NodeLayout, *, kubeconfig: Path) -> str:
    """Cluster names only, served on the bridge address; no forwarder, so a name outside
    the cluster is refused rather than looked up outside the machine."""
    ip = layout.bridge_ip
    domain = layout.cluster_domain
    return f"""{domain}:53 in-addr.arpa:53 ip6.arpa:53 {{
    bind {ip}
    errors
    health 127.0.0.1:{layout.dns_health_port}
    ready 127.0.0.1:{layout.dns_ready_port}
    kubernetes {domain} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 30
    loadbalance
}}
.:53 {{
    bind {ip}
    errors
}}
"""


def resolv_conf(layout: NodeLayout) -> str:
    """The kubelet's resolv.conf: no upstream nameserver (pods get CoreDNS and the
    cluster's search domains from the kubelet)."""
    return f"search {layout.cluster_domain}\noptions ndots:5\n"
