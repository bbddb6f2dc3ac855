"""The agreement harness's ``devices`` feature: what it generates, and how a run's claim
allocations map between runs (bench/agreement/devices.py, deviceops.py)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from bench.agreement import deviceops, devices, features, scenario

WITH_DEVICES = features.parse("+devices")


def test_devices_is_a_feature_but_not_yet_a_default() -> None:
    assert "devices" in features.FEATURES and "devices" not in features.DEFAULT_FEATURES
    assert features.DEFAULT_FEATURES | {"devices"} == WITH_DEVICES
    assert scenario.build(4).dra == devices.Devices()


def _without_claims(pods: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    out = json.loads(json.dumps(pods))
    for pod in out:
        pod["spec"].pop("resourceClaims", None)
        pod["spec"]["containers"][0].get("resources", {}).pop("claims", None)
        pod["metadata"]["namespace"] = "@ns0"
    return list(out)


def test_devices_leave_the_rest_of_the_scenario_as_it_was() -> None:
    plain, full = scenario.build(6), scenario.build(6, chosen=WITH_DEVICES)
    assert full.nodes == plain.nodes and full.volumes == plain.volumes
    assert _without_claims(full.pods) == _without_claims(plain.pods)
    assert any("resourceClaims" in p["spec"] for p in full.pods)


@pytest.mark.parametrize("seed", range(1, 31))
def test_every_claim_a_pod_names_is_made_and_every_reference_resolves(seed: int) -> None:
    scene = scenario.build(seed, chosen=WITH_DEVICES)
    made = {c["metadata"]["name"]: c for c in scene.dra.claims}
    users = Counter(
        ref["resourceClaimName"] for p in scene.pods for ref in p["spec"].get("resourceClaims", [])
    )
    assert set(users) == set(made)
    assert all(n == (2 if name == devices.SHARED_CLAIM else 1) for name, n in users.items())
    for pod in scene.pods:
        if "resourceClaims" in pod["spec"]:
            assert pod["metadata"]["namespace"] == "@ns0"
            assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "dev"}]
    classes = {o["metadata"]["name"] for o in scene.dra.objects if o["kind"] == "DeviceClass"}
    for claim in made.values():
        for request in claim["spec"]["devices"]["requests"]:
            assert request["exactly"]["deviceClassName"] in classes | {devices.MISSING_CLASS}
    nodes = {f"@{n}" for n in scene.node_names}
    for obj in scene.dra.objects:
        if obj["kind"] == "ResourceSlice" and "nodeName" in obj["spec"]:
            assert obj["spec"]["nodeName"] == obj["spec"]["pool"]["name"]
            assert obj["spec"]["nodeName"] in nodes
            assert len(obj["spec"]["devices"]) <= 8


def test_the_seeds_cover_what_the_brief_asks_for() -> None:
    """Across a few seeds: a shared claim, a missing class, a constraint, a selector, a
    network-attached pool, a node without GPUs, and counts above one."""
    scenes = [scenario.build(seed, chosen=WITH_DEVICES) for seed in range(1, 11)]
    text = json.dumps([(s.dra.objects, s.dra.claims) for s in scenes])
    for needle in (devices.SHARED_CLAIM, devices.MISSING_CLASS, "matchAttribute", '"cel"'):
        assert needle in text, needle
    assert '"allNodes": true' in text and '"count": 4' in text
    assert any(
        len([o for o in s.dra.objects if o["spec"].get("nodeName")]) < len(s.nodes) for s in scenes
    )


def test_localize_undoes_render_so_allocations_move_between_runs() -> None:
    allocation = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": devices.GPU_DRIVER, "pool": "@n03", "device": "gpu-1"}
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["@n03"]}]}
            ]
        },
    }
    theirs = scenario.render(allocation, "ag1-k", {})
    assert theirs["devices"]["results"][0]["pool"] == "ag1-k-n03"
    assert deviceops.localize(theirs, "ag1-k") == allocation
    ours = scenario.render(deviceops.localize(theirs, "ag1-k"), "ag1-s", {})
    assert json.dumps(ours).count("ag1-s-n03") == 2 and "ag1-k" not in json.dumps(ours)
    assert deviceops.localize({"driver": "ag1-kx"}, "ag1-k") == {"driver": "ag1-kx"}
