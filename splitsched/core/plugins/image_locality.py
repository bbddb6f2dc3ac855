"""ImageLocality: favour nodes that already hold the pod's images (kube-scheduler's
imagelocality plugin, v1.36 semantics), so a pod starts without a long pull.

Per node, each image of the pod (init containers, containers and image volumes) that the
node reports in status.images adds its size scaled by its spread, the share of all nodes
that hold it: int(size * nodes_with_image / all_nodes), so an image every node has counts
in full and a rare one little (the "node heating" guard). The sum, clamped to
[23 MiB, 1000 MiB x the number of containers and init containers], maps linearly onto
0..100. Names match after kube's one normalisation: a name without a tag gets ":latest"
(no default registry or "library/" is added, so "nginx" and "docker.io/library/nginx"
differ, as in kube). No NormalizeScore; default weight 1.

Sizes are as each node reports them; kube-scheduler keeps one size per name, the first
node's it saw, which differs only when nodes report one name with different sizes.

Built by `splitsched.core.profiles`; run by the framework at PreScore (skipped when no
node holds any of the pod's images: every node would score 0) and Score. Reads
`NodeTable.image_index`, rebuilt only when nodes or their images change, so a pod whose
images no node reports (scheduler_perf's, kwok's nodes) costs a few dictionary lookups.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import FloatArray, IntArray, NodeTable
from splitsched.core.plugins import basics

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """kube's normalizedImageName: ":latest" when the name has no tag after its last "/"."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def pod_images(pod: models.Pod) -> Iterator[str]:
    """The pod's images as the node reports them: init containers, containers, image
    volumes (a name listed twice counts twice, as in kube)."""
    for c in pod.init_containers:
        yield normalized_image_name(c.image)
    for c in pod.containers:
        yield normalized_image_name(c.image)
    for ref in pod.image_volumes:
        yield normalized_image_name(ref)


def calculate_priority(sums: IntArray, containers: int) -> IntArray:
    """The clamped sum mapped onto 0..MAX_NODE_SCORE, in integers as kube does."""
    high = MAX_CONTAINER_THRESHOLD * containers
    clamped = np.where(sums < MIN_THRESHOLD, MIN_THRESHOLD, np.minimum(sums, high))
    # Go's int64 division truncates toward zero, Python's floors: they agree here, as the
    # numerator is never negative with containers (and the division is exact without).
    out: IntArray = (framework.MAX_NODE_SCORE * (clamped - MIN_THRESHOLD)) // (high - MIN_THRESHOLD)
    return out


class ImageLocality(basics.NoArgs):
    name: ClassVar[str] = "ImageLocality"
    # A node's raw score depends on that node, the pod's images and how many nodes hold
    # each image: the last changes only with nodes or their images, which bump the table's
    # spec_version and so restart the score memo (see splitsched.core.scorememo).
    row_local: ClassVar[bool] = True

    def pre_score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> framework.Status:
        index = table.image_index()
        if not index or not any(name in index for name in pod_images(pod)):
            return framework.Status.skip()
        return framework.Status.success()

    def score(
        self, state: framework.CycleState, pod: models.Pod, table: NodeTable, rows: IntArray
    ) -> FloatArray:
        rows = np.asarray(rows, dtype=np.int64)
        index = table.image_index()
        sums = np.zeros(table.n, dtype=np.int64)
        for name in pod_images(pod):
            held = index.get(name)
            if held is None:
                continue
            held_rows, sizes = held
            spread = len(held_rows) / table.n
            # int64(float64(size) * spread): truncation, as Go converts.
            sums[held_rows] += (sizes.astype(np.float64) * spread).astype(np.int64)
        containers = len(pod.init_containers) + len(pod.containers)
        return calculate_priority(sums[rows], containers).astype(np.float64)

    def normalize(
        self, state: framework.CycleState, pod: models.Pod, scores: FloatArray
    ) -> FloatArray:
        return scores
