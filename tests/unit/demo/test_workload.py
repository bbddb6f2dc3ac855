"""The live demo's workload: the node mix the README promises and the pods that fit
nowhere on purpose."""

from __future__ import annotations

from collections import Counter

from splitsched.demo import workload


def test_fifty_nodes_thirty_small_fourteen_large_six_tainted_gpu() -> None:
    nodes = workload.demo_nodes()
    kinds = Counter(n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes)
    assert kinds == {"small": 30, "large": 14, "gpu": 6}
    tainted = [n for n in nodes if n["spec"].get("taints")]
    assert len(tainted) == 6
    assert all(n["status"]["allocatable"]["nvidia.com/gpu"] == "4" for n in tainted)
    zones = Counter(n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes)
    assert set(zones) == set(workload.ZONES) and max(zones.values()) - min(zones.values()) <= 1
    assert len({n["metadata"]["name"] for n in nodes}) == 50


def test_a_thousand_pods_of_which_twenty_fit_nowhere() -> None:
    pods, unfit = workload.demo_pods()
    names = [p["metadata"]["name"] for p in pods]
    assert len(pods) == 1000 and len(set(names)) == 1000
    assert len(unfit) == 20 and unfit <= set(names)
    kinds = Counter(name.split("-")[0] for name in names)
    assert kinds == {
        "web": 560, "batch": 300, "db": 60, "cache": 40, "train": 20,
        "huge": 8, "nozone": 6, "notol": 6,
    }  # fmt: skip
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert "tolerations" not in by_name["notol-0"]["spec"]
    assert by_name["train-0"]["spec"]["tolerations"] == [workload.GPU_TOLERATION]
    assert by_name["web-0"]["spec"]["topologySpreadConstraints"][0]["maxSkew"] == 1


def test_one_more_pod_is_held_by_a_scheduling_gate() -> None:
    """docs/api.md's gated example names it, in the namespace its other examples name."""
    gated = workload.gated_pod()
    assert gated["metadata"]["name"] == "train-gated" and workload.NAMESPACE == "shop"
    assert gated["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert gated["metadata"]["name"] not in {p["metadata"]["name"] for p in workload.demo_pods()[0]}
