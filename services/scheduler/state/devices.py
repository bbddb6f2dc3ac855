"""Watch events of Dynamic Resource Allocation into the scheduler's view: DeviceClasses,
ResourceSlices and ResourceClaims.

The service turns the watcher's `device_class`, `resource_slice` and `resource_claim`
events into `apply_devices` calls (a snapshot's items count as ADDED). The objects go to
the node table's `DeviceView`; an addition or update requeues the pods waiting for one (a
deletion makes no pod fit, so none is registered, as for storage). A claim's change moves
only the pods kube's queueing hint would (`devices.hints`), and a claim deleted while it
held devices may help any pod.
"""

from __future__ import annotations

from services.scheduler.state.books import StateBooks
from splitsched.core import framework
from splitsched.core.devices import hints, model
from splitsched.core.devices.view import DeviceObject

_Event = framework.ClusterEvent
#: (added, updated) cluster events per kind of device object.
_EVENTS: dict[type, tuple[_Event, _Event]] = {
    model.DeviceClass: (_Event.DEVICE_CLASS_ADD, _Event.DEVICE_CLASS_UPDATE),
    model.ResourceSlice: (_Event.RESOURCE_SLICE_ADD, _Event.RESOURCE_SLICE_UPDATE),
    model.ResourceClaim: (_Event.RESOURCE_CLAIM_ADD, _Event.RESOURCE_CLAIM_UPDATE),
}


class DeviceEvents(StateBooks):
    def apply_devices(self, kind: str, obj: DeviceObject) -> None:
        """kind: ADDED | MODIFIED | DELETED (snapshot items count as ADDED)."""
        view = self.cache.table.devices
        if isinstance(obj, model.ResourceClaim):
            self._apply_claim(kind, obj)
            return
        if kind == "DELETED":
            view.remove(obj)
            return
        added, updated = _EVENTS[type(obj)]
        view.set(obj)
        self.queue.on_event(added if kind == "ADDED" else updated)

    def _apply_claim(self, kind: str, claim: model.ResourceClaim) -> None:
        """A claim's change moves only the waiting pods kube's queueing hint would
        (`devices.hints`): every binding with devices writes a claim."""
        view = self.cache.table.devices
        old = view.claims.get((claim.namespace, claim.name))
        if kind == "DELETED":
            view.remove(claim)
            if hints.deletion_frees_devices(old):
                self.queue.on_event(_Event.RESOURCE_CLAIM_UPDATE)
            return
        view.set(claim)
        event = _Event.RESOURCE_CLAIM_ADD if old is None else _Event.RESOURCE_CLAIM_UPDATE
        self.queue.on_event(event, hints.after_claim_change(old, claim, view))
