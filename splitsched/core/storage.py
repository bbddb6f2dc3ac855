"""Storage as scheduling reads it: PersistentVolumeClaims, PersistentVolumes, StorageClasses
and CSINodes, and the volume writes a decision carries to the binder.

Frozen values, built once per watch event (by `splitsched.core.convert` from API JSON in
the watcher, by `splitsched.wire_storage` in the scheduler) and kept in the scheduler's
`splitsched.core.storageview.StorageView`. The helpers below are the parts of
kube-scheduler's volume binder (k8s.io/component-helpers/storage/volume) that judge one
claim against one volume without looking at nodes: which volumes a claim may take.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from splitsched.core import models

# PersistentVolumeClaim and PersistentVolume phases, binding modes and access modes.
CLAIM_BOUND = "Bound"
CLAIM_LOST = "Lost"
VOLUME_AVAILABLE = "Available"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
FILESYSTEM = "Filesystem"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
#: A StorageClass provisioner that provisions nothing: static volumes only.
NO_PROVISIONER = "kubernetes.io/no-provisioner"
#: The annotation the scheduler's decision puts on a claim to provision it on a node.
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A PersistentVolume's spec.claimRef: the claim it is (being) bound to."""

    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    """What scheduling reads of a claim. `storage_class_name` is the class it asks for
    ("" when none: kube's GetPersistentVolumeClaimClass, the beta annotation first);
    `selector` None takes any volume; `invalid_reason` is set when the watcher could not
    read it, and the pods using it wait with that reason."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    storage_class_name: str = ""
    has_storage_class: bool = False
    access_modes: tuple[str, ...] = ()
    request_bytes: int = 0
    volume_name: str = ""
    phase: str = "Pending"
    selector: models.LabelSelector | None = None
    selected_node: str = ""
    volume_mode: str = FILESYSTEM
    invalid_reason: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def fully_bound(self) -> bool:
        """Bound to its volume for good. kube reads the pv.kubernetes.io/bind-completed
        annotation, which the PV controller sets in the update before the one that makes
        the phase Bound: the stream carries the phase, a moment later."""
        return bool(self.volume_name) and self.phase == CLAIM_BOUND


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    """What scheduling reads of a volume. `node_affinity` None: any node (no
    spec.nodeAffinity.required); its terms are ORed, and an empty tuple matches no node."""

    name: str
    uid: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    storage_class_name: str = ""
    access_modes: tuple[str, ...] = ()
    capacity_bytes: int = 0
    node_affinity: tuple[models.NodeSelectorTerm, ...] | None = None
    claim_ref: ClaimRef | None = None
    phase: str = VOLUME_AVAILABLE
    csi_driver: str = ""
    volume_mode: str = FILESYSTEM
    invalid_reason: str = ""


@dataclass(frozen=True, slots=True)
class TopologySelectorRequirement:
    key: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StorageClass:
    """`allowed_topologies`: terms ORed, requirements (key In values) ANDed; none at all
    allows every node."""

    name: str
    resource_version: str = ""
    provisioner: str = ""
    volume_binding_mode: str = IMMEDIATE
    allowed_topologies: tuple[tuple[TopologySelectorRequirement, ...], ...] = ()
    is_default: bool = False

    @property
    def waits_for_first_consumer(self) -> bool:
        return self.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER

    @property
    def can_provision(self) -> bool:
        return bool(self.provisioner) and self.provisioner != NO_PROVISIONER


@dataclass(frozen=True, slots=True)
class CSINode:
    """How many volumes of each CSI driver the node can attach (drivers without a count
    are absent: no limit)."""

    name: str
    resource_version: str = ""
    allocatable: Mapping[str, int] = field(default_factory=dict)
    invalid_reason: str = ""


@dataclass(frozen=True, slots=True)
class VolumeBinding:
    """One write the binder makes before the pod's Binding (kube-scheduler's VolumeBinding
    PreBind): bind volume `pv_name` to the claim, or with `pv_name` empty mark the claim
    with the selected node so its provisioner creates a volume there."""

    claim_namespace: str
    claim_name: str
    pv_name: str = ""


StorageObject = PersistentVolumeClaim | PersistentVolume | StorageClass | CSINode


# ---- one claim against one volume (component-helpers/storage/volume) ------------------------


def bound_to_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """IsVolumeBoundToClaim: the volume's claimRef names the claim (and its uid, if the
    claimRef has one)."""
    ref = volume.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
        return False
    return not ref.uid or ref.uid == claim.uid


def access_modes_fit(claim: PersistentVolumeClaim, volume: PersistentVolume) -> bool:
    """CheckAccessModes: the volume offers every mode the claim asks for."""
    return all(mode in volume.access_modes for mode in claim.access_modes)


def may_take(claim: PersistentVolumeClaim, volume: PersistentVolume) -> bool:
    """What FindMatchingVolume checks of an available volume before its node affinity:
    unclaimed, big enough, the same volume mode, phase Available, matching the claim's
    selector, of the claim's class, offering its access modes."""
    return (
        volume.claim_ref is None
        and not volume.invalid_reason
        and volume.capacity_bytes >= claim.request_bytes
        and volume.volume_mode == claim.volume_mode
        and volume.phase == VOLUME_AVAILABLE
        and (claim.selector is None or claim.selector.matches(volume.labels))
        and volume.storage_class_name == claim.storage_class_name
        and access_modes_fit(claim, volume)
    )


def prebound_for(claim: PersistentVolumeClaim, volume: PersistentVolume) -> bool:
    """A volume already bound (or assumed) to this claim that FindMatchingVolume returns
    wherever its node affinity allows, whatever else is available: big enough and of the
    claim's volume mode."""
    return (
        bound_to_claim(volume, claim)
        and not volume.invalid_reason
        and volume.capacity_bytes >= claim.request_bytes
        and volume.volume_mode == claim.volume_mode
    )
