"""Storage the API server would refuse, or that names what is not there, through the whole
scheduler service (issue 18, bad input): the watcher's own conversion of the API JSON fills
an in-process watcher stream, and the scheduler runs whole against it and a binder that
records what it is sent. Each pod gets a FailedScheduling report (what the binder writes
on the pod) that says what is wrong, and nothing crashes: the pod that uses none of it is
bound. The object-level checks are unit tests (tests/unit/core/convert/test_storage.py,
tests/unit/watcher/test_storage_entries.py, the plugins' tests under tests/unit/core/plugins)."""

from __future__ import annotations

import asyncio
from typing import Any

from services.watcher import entries, ring
from splitsched.testing import kube
from splitsched.testing import storage as st
from tests.support import watcher as fake_watcher
from tests.support.scheduler import recording_binder, running_scheduler

NOW = 1_700_000_000.0
NS = "team"
EBS = "ebs.csi.aws.com"
CONVERT = entries.Converter()
#: What kube-scheduler's PostFilter plugins add when preemption cannot help on any node.
NOT_HELPFUL = (
    " no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not "
    "helpful for scheduling."
)


def named(manifest: dict[str, Any], *, namespace: str = "") -> dict[str, Any]:
    meta = manifest["metadata"]
    meta.update(uid=f"uid-{meta['name']}", resourceVersion="1")
    if namespace:
        meta["namespace"] = namespace
    return manifest


def malformed_affinity(pv: dict[str, Any]) -> dict[str, Any]:
    """An operator the API server refuses."""
    term = {"matchExpressions": [{"key": st.ZONE, "operator": "Near", "values": ["z1"]}]}
    pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return pv


def bound(claim: str, pv: dict[str, Any]) -> list[dict[str, Any]]:
    """The claim and the PV bound to each other, as the PV controller leaves them."""
    pvc = named(st.make_pvc(claim, volume_name=pv["metadata"]["name"]), namespace=NS)
    pvc["status"] = {"phase": "Bound"}
    pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": NS, "name": claim,
                              "uid": f"uid-{claim}"}  # fmt: skip
    pv["status"] = {"phase": "Bound"}
    return [pvc, named(pv)]


def pod(name: str, *claims: str) -> dict[str, Any]:
    return named(st.with_claims(kube.make_pod(name), claims), namespace=NS)


def objects(*manifests: dict[str, Any]) -> list[ring.Entry]:
    """The watcher's entries for these manifests."""
    convert = {"Node": CONVERT.node, "Pod": CONVERT.pod, "PersistentVolume": CONVERT.pv,
               "PersistentVolumeClaim": CONVERT.pvc, "StorageClass": CONVERT.storage_class,
               "CSINode": CONVERT.csi_node}  # fmt: skip
    out = []
    for manifest in manifests:
        entry = convert[manifest.get("kind", "Node")](manifest, NOW)
        assert entry is not None
        out.append(entry)
    return out


def nodes() -> list[dict[str, Any]]:
    return [named(kube.make_node("node-a")), named(kube.make_node("node-b"))]


async def reports(items: list[ring.Entry], pods: list[str]) -> dict[str, str]:
    """The scheduler against a watcher holding `items` and the pod "plain" that uses no
    storage: the FailedScheduling message reported for each of `pods`, once "plain" was
    bound (the scheduler decides on, whatever it was fed)."""
    hub = ring.ClusterHub(ring_size=100, first_sequence=1)
    for entry in [*items, *objects(pod("plain"))]:
        hub.upsert(entry)
    hub.mark_synced()
    async with (
        recording_binder() as (binder, binder_port),
        fake_watcher.serving(hub) as watcher_port,
        running_scheduler(watcher_port, binder_port, "--settle-seconds", "0"),
    ):
        out = {name: (await binder.report_for(name)).message for name in pods}
        assert [r.pod.name for r in binder.requests] == ["plain"]
        assert {r.reason for r in binder.reports} == {"Unschedulable"}
        return out


def test_a_missing_class_and_malformed_volume_affinities_are_named() -> None:
    """A claim naming a class that does not exist waits as kube's does (a claim of no
    known WaitForFirstConsumer class is the PV controller's to bind); a bound claim whose
    volume's node affinity cannot be read names the volume and the field; a claim whose
    only candidate volume is such a one finds no volume, in kube's words."""
    items = objects(
        *nodes(),
        named(st.make_storage_class("local")),
        named(st.make_pvc("orphan", storage_class="gone"), namespace=NS),
        pod("no-class", "orphan"),
        *bound("data", malformed_affinity(st.make_pv("pv-bad"))),
        pod("odd-bound", "data"),
        named(st.make_pvc("waiting", storage_class="local"), namespace=NS),
        named(malformed_affinity(st.make_pv("pv-odd", storage_class="local"))),
        pod("odd-choice", "waiting"),
    )
    got = asyncio.run(asyncio.wait_for(reports(items, ["no-class", "odd-bound", "odd-choice"]), 60))
    assert got == {
        "no-class": "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."
        + NOT_HELPFUL,
        "odd-bound": '0/2 nodes are available: persistentvolume "pv-bad" is invalid: '
        "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator: "
        "unsupported operator 'Near'." + NOT_HELPFUL,
        "odd-choice": "0/2 nodes are available: 2 node(s) didn't find available persistent "
        "volumes to bind." + NOT_HELPFUL,
    }


def test_csinodes_with_a_negative_count_take_no_volume_of_theirs() -> None:
    items = objects(
        *nodes(),
        named(st.make_csi_node("node-a", {EBS: -1})),
        named(st.make_csi_node("node-b", {EBS: -3})),
        *bound("ebs", st.make_pv("pv-ebs", csi_driver=EBS)),
        pod("csi", "ebs"),
    )
    got = asyncio.run(asyncio.wait_for(reports(items, ["csi"]), 60))
    assert got == {
        "csi": "0/2 nodes are available: 2 node(s) had a CSINode whose volume limits cannot "
        "be read. no new claims to deallocate, preemption: 0/2 nodes are available: 2 No "
        "preemption victims found for incoming pod."
    }
