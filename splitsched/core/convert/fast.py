"""Fast keyword-only constructors for the frozen model classes the converters build.

`fast.Pod(uid=..., name=...)` builds the same object as `models.Pod(...)` at about a
quarter of the cost: Python 3.11's frozen __init__ goes through object.__setattr__ per
field, which dominated pod conversion on the watcher's hot path. The constructors are
generated from `dataclasses.fields`, so they follow model changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from splitsched.core import models

_T = TypeVar("_T")
_UNSET: Any = object()


def fast_constructor(cls: type[_T]) -> Callable[..., _T]:
    """A keyword-only constructor for a frozen, slotted dataclass that fills the slots
    directly. Classes without slots or with a __post_init__ keep their own constructor."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        return cls
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_UNSET": _UNSET}
    params: list[str] = []
    body: list[str] = ["    self = _new(_cls)"]
    for f in fields:
        name = f.name
        namespace[f"_set_{name}"] = cls.__dict__[name].__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = f.default
            default = f"_default_{name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = f.default_factory
            default = "_UNSET"
        else:
            default = ""
        if not f.init:
            value = f"_factory_{name}()" if default == "_UNSET" else default
            body.append(f"    _set_{name}(self, {value})")
            continue
        params.append(f"{name}={default}" if default else name)
        if default == "_UNSET":
            body.append(f"    if {name} is _UNSET: {name} = _factory_{name}()")
        body.append(f"    _set_{name}(self, {name})")
    source = f"def make(*, {', '.join(params)}):\n" + "\n".join(body) + "\n    return self\n"
    exec(source, namespace)
    maker: Callable[..., _T] = namespace["make"]
    return maker


Pod = fast_constructor(models.Pod)
Container = fast_constructor(models.Container)
HostPort = fast_constructor(models.HostPort)
Toleration = fast_constructor(models.Toleration)
TopologySpreadConstraint = fast_constructor(models.TopologySpreadConstraint)
LabelSelector = fast_constructor(models.LabelSelector)
LabelSelectorRequirement = fast_constructor(models.LabelSelectorRequirement)
NodeSelectorRequirement = fast_constructor(models.NodeSelectorRequirement)
NodeSelectorTerm = fast_constructor(models.NodeSelectorTerm)
PreferredSchedulingTerm = fast_constructor(models.PreferredSchedulingTerm)
NodeAffinity = fast_constructor(models.NodeAffinity)
PodAffinityTerm = fast_constructor(models.PodAffinityTerm)
WeightedPodAffinityTerm = fast_constructor(models.WeightedPodAffinityTerm)
PodAffinity = fast_constructor(models.PodAffinity)
OwnerRef = fast_constructor(models.OwnerRef)
PodGroupRef = fast_constructor(models.PodGroupRef)
Taint = fast_constructor(models.Taint)
Node = fast_constructor(models.Node)
ContainerImage = fast_constructor(models.ContainerImage)
