"""ImageLocality against kube-scheduler v1.36: the cases of imagelocality/image_locality_test.go
(TestImageLocalityPriority, TestNormalizedImageName) with their expected scores, plus the
skip that keeps pods without known images free, and the memo staying right as images move.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.nodetable import NodeTable
from splitsched.core.plugins.image_locality import (
    MB,
    ImageLocality,
    normalized_image_name,
)
from tests.support import builders

Image = tuple[tuple[str, ...], int]

NODE_40_300_2000: Sequence[Image] = (
    (("gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"), 40 * MB),
    (("gcr.io/300:latest", "gcr.io/300:v1"), 300 * MB),
    (("gcr.io/2000:latest",), 2000 * MB),
)
NODE_250_10: Sequence[Image] = (
    (("gcr.io/250:latest",), 250 * MB),
    (("gcr.io/10:latest", "gcr.io/10:v1"), 10 * MB),
)
NODE_600_40_900: Sequence[Image] = (
    (("gcr.io/600:latest",), 600 * MB),
    (("gcr.io/40:latest",), 40 * MB),
    (("gcr.io/900:latest",), 900 * MB),
)
NODE_300_600_900: Sequence[Image] = (
    (("gcr.io/300:latest",), 300 * MB),
    (("gcr.io/600:latest",), 600 * MB),
    (("gcr.io/900:latest",), 900 * MB),
)
NODE_4000_30: Sequence[Image] = (
    (("gcr.io/4000:latest",), 4000 * MB),
    (("gcr.io/30:latest",), 30 * MB),
)
NODE_20_30_40: Sequence[Image] = (
    (("gcr.io/20:latest",), 20 * MB),
    (("gcr.io/30:latest",), 30 * MB),
    (("gcr.io/40:latest",), 40 * MB),
)
NO_IMAGES: Sequence[Image] = ()


def image_node(name: str, images: Sequence[Image], *, cpu: int = 0) -> models.Node:
    return models.Node(
        name=name,
        allocatable={models.PODS: 110, models.CPU: cpu},
        images=tuple(models.ContainerImage(names, size) for names, size in images),
    )


def image_pod(*images: str, init: Sequence[str] = (), volumes: Sequence[str] = ()) -> models.Pod:
    return builders.pod(
        containers=[models.Container(name=f"c{i}", image=im) for i, im in enumerate(images)],
        init_containers=[models.Container(name=f"i{i}", image=im) for i, im in enumerate(init)],
        image_volumes=tuple(volumes),
    )


def scores(pod: models.Pod, table: NodeTable) -> list[int] | None:
    """Per node, in table order, the plugin's score; None when PreScore skips it."""
    plugin = ImageLocality()
    state = framework.CycleState()
    rows = np.arange(table.n, dtype=np.int64)
    if plugin.pre_score(state, pod, table, rows).code is framework.Code.SKIP:
        return None
    raw = plugin.normalize(state, pod, plugin.score(state, pod, table, rows))
    return [int(s) for s in raw]


def table(*nodes: Sequence[Image]) -> NodeTable:
    return builders.table_of([image_node(f"node{i + 1}", imgs) for i, imgs in enumerate(nodes)])


@pytest.mark.parametrize(
    ("pod", "nodes", "expected"),
    [
        # Each case's comment in kube's test works the numbers out.
        (image_pod("gcr.io/40", "gcr.io/250"), (NODE_40_300_2000, NODE_250_10), [0, 5]),
        (image_pod("gcr.io/40", "gcr.io/300"), (NODE_40_300_2000, NODE_250_10), [7, 0]),
        (image_pod("gcr.io/10", "gcr.io/4000"), (NODE_4000_30, NODE_250_10), [100, 0]),
        (image_pod("gcr.io/10", "gcr.io/4000"), (NODE_4000_30, NODE_250_10, NO_IMAGES), [66, 0, 0]),
        (
            image_pod("gcr.io/300", "gcr.io/600", "gcr.io/900"),
            (NODE_600_40_900, NODE_300_600_900, NO_IMAGES),
            [32, 36, 0],
        ),
        (image_pod("gcr.io/30", "gcr.io/40"), (NODE_20_30_40, NODE_4000_30), [1, 0]),
        (image_pod("gcr.io/30", volumes=["gcr.io/300"]), (NODE_300_600_900, NODE_4000_30), [12, 0]),
        (image_pod("gcr.io/30", init=["gcr.io/300"]), (NODE_40_300_2000, NODE_20_30_40), [6, 0]),
    ],
    ids=[
        "two images spread on two nodes, prefer the larger image one",
        "two images on one node, prefer this node",
        "if exceed limit, use limit",
        "if exceed limit, use limit (with node which has no images present)",
        "pod with multiple large images, node2 is preferred",
        "pod with multiple small images",
        "pod with ImageVolume",
        "include InitContainers",
    ],
)
def test_kube_image_locality_priority_cases(
    pod: models.Pod, nodes: Sequence[Sequence[Image]], expected: list[int]
) -> None:
    assert scores(pod, table(*nodes)) == expected


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@sha256:" + "0" * 64, "root@sha256:" + "0" * 64),
        # kube adds no default registry or library/ (its own TODO says so): these differ.
        ("nginx", "nginx:latest"),
        ("docker.io/library/nginx", "docker.io/library/nginx:latest"),
    ],
)
def test_normalized_image_name(name: str, normalized: str) -> None:
    assert normalized_image_name(name) == normalized


def test_a_pod_whose_images_no_node_holds_skips_scoring() -> None:
    """Every node would score 0, so PreScore skips: a pod of an image-less cluster (kwok,
    scheduler_perf) pays a dictionary lookup per image."""
    assert scores(image_pod("gcr.io/40"), table(NO_IMAGES, NO_IMAGES)) is None
    assert scores(image_pod("gcr.io/7"), table(NODE_40_300_2000, NO_IMAGES)) is None
    assert scores(image_pod("gcr.io/40"), table(NODE_40_300_2000, NO_IMAGES)) == [0, 0]


def test_the_default_profile_prefers_the_node_holding_the_image() -> None:
    """Weight 1 in the default profile: of two equal nodes, the one holding the pod's
    900 MiB image scores int(900 MiB * 1/2) -> 100 * (450 - 23) / (1000 - 23) = 43 more."""
    big = ((("registry.example/big:1",), 900 * MB),)
    nodes = [image_node("plain", NO_IMAGES, cpu=4000), image_node("cached", big, cpu=4000)]
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(table=builders.table_of(nodes)),
        profiles=profiles.load_profiles(None),
    )
    app = models.Container(name="c", image="registry.example/big:1", requests={"cpu": 100})
    pod = builders.pod("p", scheduler_name="splitsched", containers=[app])
    scored = algo.scored_nodes(algo.profiles["splitsched"], pod)
    assert scored is not None
    rows, totals = scored.rows.tolist(), scored.total.tolist()
    by_node = {algo.table.names[r]: t for r, t in zip(rows, totals, strict=True)}
    assert by_node["cached"] - by_node["plain"] == 43
    assert scored.per_plugin["ImageLocality"].tolist() == [0, 43]
    result = algo.schedule(pod)
    assert result.bind is not None and result.bind.node == "cached"


def test_image_changes_reach_the_score_memo() -> None:
    """Row-local for the memo: an image pulled onto a node changes the table's spec
    version, so the next pod of the same shape is scored afresh."""
    t = builders.table_of([image_node("a", NO_IMAGES), image_node("b", NO_IMAGES)])
    version = t.spec_version
    t.set_node(image_node("b", NODE_40_300_2000))
    assert t.spec_version > version
    assert set(t.image_index()) == {"gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/300:latest",
                                    "gcr.io/300:v1", "gcr.io/2000:latest"}  # fmt: skip
    rows, sizes = t.image_index()["gcr.io/40:v1"]
    assert rows.tolist() == [1] and sizes.tolist() == [40 * MB]  # listed twice, counted once
    heartbeat = t.spec_version
    t.set_node(image_node("b", NODE_40_300_2000))
    assert t.spec_version == heartbeat
