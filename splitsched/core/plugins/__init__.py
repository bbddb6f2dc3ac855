"""The default plugins, one module each, and the registry that profiles build them from.

Each plugin is a class whose constructor takes its `pluginConfig` args mapping and that
implements some of the protocols in `splitsched.core.framework`. DevicePacking is
splitsched's own (`schedconfig.kubeplugins.SPLITSCHED_ONLY`): never in the default
profile, run only where a profile enables it.
"""

from __future__ import annotations

from collections.abc import Mapping

from splitsched.core import framework
from splitsched.core.plugins import (
    balanced_allocation,
    default_preemption,
    device_packing,
    dynamic_resources,
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_unschedulable,
    node_volume_limits,
    resources_fit,
    taint_toleration,
    topology_spread,
    volume_binding,
    volume_restrictions,
    volume_zone,
)

REGISTRY: Mapping[str, framework.PluginFactory] = {
    "NodeUnschedulable": node_unschedulable.NodeUnschedulable,
    "NodeName": node_name.NodeName,
    "TaintToleration": taint_toleration.TaintToleration,
    "NodeAffinity": node_affinity.NodeAffinity,
    "NodePorts": node_ports.NodePorts,
    "NodeResourcesFit": resources_fit.NodeResourcesFit,
    "VolumeRestrictions": volume_restrictions.VolumeRestrictions,
    "NodeVolumeLimits": node_volume_limits.NodeVolumeLimits,
    "VolumeBinding": volume_binding.VolumeBinding,
    "VolumeZone": volume_zone.VolumeZone,
    "NodeResourcesBalancedAllocation": balanced_allocation.NodeResourcesBalancedAllocation,
    "PodTopologySpread": topology_spread.PodTopologySpread,
    "InterPodAffinity": inter_pod_affinity.InterPodAffinity,
    "DynamicResources": dynamic_resources.DynamicResources,
    "DefaultPreemption": default_preemption.DefaultPreemption,
    "ImageLocality": image_locality.ImageLocality,
    "DevicePacking": device_packing.DevicePacking,
}
