"""Where a node's devices sit: the topology units they nest in, read from their attributes,
and how fragmented a choice of devices leaves the node (for the opt-in DevicePacking).

A device's topology path is one value per level, outermost first; the default levels are
an interconnect island, a NUMA node and a PCIe root (`DEFAULT_LEVELS`). A level's name
without a domain ("pcieRoot") is read as the device driver's attribute
("gpu.example.com/pcieRoot"), else as Kubernetes' shared one
("resource.kubernetes.io/pcieRoot"); a name with a domain is read as it is. The devices
without a level's attribute share one unit at that level (nothing tells them apart: a
node whose devices say nothing of their topology is one unit, and packing leaves kube's
choice as it is). The node is the outermost unit; a unit at level k is the path's first
k+1 values, so units nest.

The fragmentation key is buddy-style: fewer units spanned by the pod's devices (outer
levels first), then the free counts the choice leaves in each level's units, largest
first, as large as possible (the largest free units kept whole). Smaller keys are better.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from splitsched.core.devices import model
from splitsched.core.devices.pools import Candidate, Pool

DeviceId = tuple[str, str, str]
#: The topology levels read when the plugin's args name none, outermost first.
DEFAULT_LEVELS: tuple[str, ...] = ("island", "numaNode", "pcieRoot")
#: The domain of the attributes Kubernetes standardises across drivers.
SHARED_DOMAIN = "resource.kubernetes.io"
Path = tuple[str, ...]
FragmentationKey = tuple[tuple[int, ...], ...]


def device_path(candidate: Candidate, levels: Sequence[str]) -> Path:
    """The candidate's topology values, one per level (see the module docstring)."""
    values = (_attribute(candidate.device, candidate.driver, level) for level in levels)
    return tuple("?" if v is None else f"{type(v).__name__}:{v}" for v in values)


def _attribute(device: model.Device, driver: str, level: str) -> model.AttributeValue | None:
    if "/" in level:
        return device.attributes.get(level)
    found = device.attributes.get(f"{driver}/{level}")
    return found if found is not None else device.attributes.get(f"{SHARED_DOMAIN}/{level}")


@dataclass(frozen=True, slots=True)
class Layout:
    """One node's devices (those of its searched pools) with their paths, and which are
    free (held by no claim)."""

    paths: Mapping[DeviceId, Path]
    free: frozenset[DeviceId]
    depth: int

    @classmethod
    def of(
        cls, pools: Sequence[Pool], in_use: Collection[DeviceId], levels: Sequence[str]
    ) -> Layout:
        paths = {
            c.device_id: device_path(c, levels)
            for p in pools
            if not (p.incomplete or p.invalid_reason)
            for c in p.candidates
        }
        return cls(paths, frozenset(d for d in paths if d not in in_use), len(levels))

    def units(self) -> list[tuple[Path, int]]:
        """Every unit below the node that has free devices, with its free count, best fit
        first: fewest free, then the innermost."""
        counts: Counter[Path] = Counter()
        for device in self.free:
            path = self.paths[device]
            for k in range(1, self.depth + 1):
                counts[path[:k]] += 1
        return sorted(counts.items(), key=lambda item: (item[1], -len(item[0]), item[0]))

    def free_in(self, unit: Path) -> int:
        return sum(1 for d in self.free if self.paths[d][: len(unit)] == unit)

    def smallest_unit(self, taken: Iterable[DeviceId]) -> Path:
        """The innermost unit holding all of `taken` (() is the whole node)."""
        paths = [self.paths[d] for d in taken if d in self.paths]
        if not paths:
            return ()
        common = 0
        while common < self.depth and all(p[common] == paths[0][common] for p in paths):
            common += 1
        return paths[0][:common]

    def fragmentation(self, taken: Collection[DeviceId]) -> FragmentationKey:
        """The module docstring's key for taking `taken` (devices not in the layout are
        left out of it)."""
        mine = [self.paths[d] for d in taken if d in self.paths]
        spans = tuple(len({p[:k] for p in mine}) for k in range(1, self.depth + 1))
        left = [self.paths[d] for d in self.free if d not in taken]
        shapes = []
        for k in range(1, self.depth + 1):
            per_unit = Counter(p[:k] for p in left)
            shapes.append(tuple(-n for n in sorted(per_unit.values(), reverse=True)))
        return (spans, *shapes)


def unit_first(pools: Sequence[Pool], layout: Layout, unit: Path) -> list[Pool]:
    """The pools with, in each, the free devices of `unit` moved to the front (the others
    keep their order): the allocator, which takes the first answer in candidate order,
    then tries `unit` first. Pools keep their order, so an `All` request's devices and
    every error stay as kube's order finds them."""
    out = []
    for pool in pools:
        inside = [c for c in pool.candidates if _in_unit(layout, c.device_id, unit)]
        if not inside:
            out.append(pool)
            continue
        rest = [c for c in pool.candidates if not _in_unit(layout, c.device_id, unit)]
        out.append(
            Pool(pool.driver, pool.name, (*inside, *rest), pool.incomplete, pool.invalid_reason)
        )
    return out


def _in_unit(layout: Layout, device: DeviceId, unit: Path) -> bool:
    path = layout.paths.get(device)
    return path is not None and device in layout.free and path[: len(unit)] == unit
