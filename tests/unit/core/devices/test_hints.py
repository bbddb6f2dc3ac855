"""kube-scheduler's queueing hint for ResourceClaim events (isSchedulableAfterClaimChange):
which waiting pods a claim's change may help."""

from __future__ import annotations

import dataclasses

from splitsched.core import models
from splitsched.core.devices import hints, model
from splitsched.core.devices.view import DeviceView
from tests.support.devices import claim, name_is

HELD = model.Allocation((model.DeviceResult("req-0", "driver-a", "pool-1", "gpu-0"),), name_is("n"))
MINE = claim("mine")  # namespace "default"
OTHER = claim("other")


def pod(*claims: str, waiting: str = "", namespace: str = "default") -> models.Pod:
    entries = tuple(models.PodResourceClaim(c, c, waiting=waiting) for c in claims)
    return models.Pod(f"uid-{'-'.join(claims)}", namespace, "p", resource_claims=entries)


def view_with(*claims: model.ResourceClaim) -> DeviceView:
    view = DeviceView()
    for c in claims:
        view.set(c)
    return view


def wakes(
    old: model.ResourceClaim | None, new: model.ResourceClaim, p: models.Pod, view: DeviceView
) -> bool:
    hint = hints.after_claim_change(old, new, view)
    return hint is hints.ANY_POD or hint(p)


def test_a_new_claim_wakes_the_pod_using_it_and_no_other() -> None:
    view = view_with(MINE, OTHER)
    assert wakes(None, MINE, pod("mine"), view)
    assert not wakes(None, MINE, pod("other"), view)
    assert not wakes(None, MINE, pod("mine", namespace="elsewhere"), view)


def test_a_pod_with_a_claim_still_missing_is_not_woken() -> None:
    view = view_with(MINE)
    assert not wakes(None, MINE, pod("mine", "other"), view)
    assert not wakes(None, MINE, pod("mine", waiting="waiting for the controller"), view)


def test_an_allocation_written_for_another_pod_wakes_nobody_else() -> None:
    allocated = dataclasses.replace(OTHER, allocation=HELD)
    view = view_with(MINE, allocated)
    assert not wakes(OTHER, allocated, pod("mine"), view)
    assert wakes(OTHER, allocated, pod("other"), view)  # its own claim's status changed


def test_a_change_outside_the_status_wakes_nobody() -> None:
    """The finalizer, labels: the resourceVersion moves, nothing a pod reads does."""
    newer = dataclasses.replace(MINE, resource_version="2")
    view = view_with(newer)
    assert not wakes(MINE, newer, pod("mine"), view)


def test_a_deallocation_may_help_any_pod() -> None:
    allocated = dataclasses.replace(OTHER, allocation=HELD)
    view = view_with(MINE, OTHER)
    assert hints.after_claim_change(allocated, OTHER, view) is hints.ANY_POD
    assert wakes(allocated, OTHER, pod("mine"), view)


def test_only_a_deleted_claim_that_held_devices_may_help() -> None:
    assert hints.deletion_frees_devices(dataclasses.replace(OTHER, allocation=HELD))
    assert not hints.deletion_frees_devices(OTHER)
    assert not hints.deletion_frees_devices(None)
