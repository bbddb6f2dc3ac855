"""The manifests tests create: kwok nodes kwok will manage, pending pods addressed to a
scheduler."""

from __future__ import annotations

from splitsched.testing import manifests


def test_a_node_is_managed_by_kwok_with_what_it_was_given() -> None:
    node = manifests.make_node(
        "n1", cpu="4", labels={"zone": "a"}, extended={"nvidia.com/gpu": "2"},
        taints=[{"key": "k", "effect": "NoSchedule"}],
    )  # fmt: skip
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"]["zone"] == "a"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
    assert node["status"]["allocatable"] == {
        "cpu": "4", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "2",
    }  # fmt: skip
    assert node["status"]["capacity"] == node["status"]["allocatable"]
    assert node["spec"] == {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    assert manifests.make_node("n2")["spec"] == {}


def test_a_pod_waits_for_its_scheduler_and_extended_resources_get_limits() -> None:
    pod = manifests.make_pod("p", extended={"nvidia.com/gpu": "1"}, priority_class_name="high")
    spec = pod["spec"]
    assert spec["schedulerName"] == manifests.DEFAULT_SCHEDULER_NAME
    assert spec["priorityClassName"] == "high"
    (container,) = spec["containers"]
    assert container["image"] == manifests.PAUSE_IMAGE
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    bare = manifests.make_pod("q", cpu=None, memory=None, scheduler_name="other")
    assert "resources" not in bare["spec"]["containers"][0]
    assert bare["spec"]["schedulerName"] == "other"


def test_make_pods_names_them_by_index() -> None:
    pods = manifests.make_pods(3, name_prefix="w", cpu="1")
    assert [p["metadata"]["name"] for p in pods] == ["w-0", "w-1", "w-2"]
    assert {p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in pods} == {"1"}
