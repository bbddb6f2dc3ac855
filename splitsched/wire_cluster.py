"""Conversion between the cluster facts other than nodes and pods, as models, and their
`splitsched.v1.types_pb2` messages: PodDisruptionBudgets (the preemption plugin reads
them) and Namespaces (InterPodAffinity's namespaceSelector). `splitsched.wire`'s
conventions apply.
"""

from __future__ import annotations

from splitsched import wire
from splitsched.core import models
from splitsched.v1 import types_pb2

__all__ = ["namespace_from_proto", "pdb_from_proto", "pdb_to_proto"]


# ---- PodDisruptionBudgets ---------------------------------------------------------------


def pdb_to_proto(pdb: models.PodDisruptionBudget) -> types_pb2.PodDisruptionBudget:
    """The wire form of a PodDisruptionBudget (the model keeps no resourceVersion)."""
    msg = types_pb2.PodDisruptionBudget(
        namespace=pdb.namespace, name=pdb.name, disruptions_allowed=pdb.disruptions_allowed
    )
    if pdb.selector is not None:
        wire._label_selector_into(pdb.selector, msg.selector)
    return msg


def pdb_from_proto(msg: types_pb2.PodDisruptionBudget) -> models.PodDisruptionBudget:
    """The model of a streamed PodDisruptionBudget: an unset selector protects no pod (an
    empty one, set, protects every pod of the namespace)."""
    return models.PodDisruptionBudget(
        namespace=msg.namespace,
        name=msg.name,
        selector=wire._label_selector(msg.selector) if msg.HasField("selector") else None,
        disruptions_allowed=msg.disruptions_allowed,
    )


def namespace_from_proto(msg: types_pb2.Namespace) -> models.Namespace:
    """The model of a streamed Namespace (the watcher builds the message from API JSON)."""
    return models.Namespace(name=msg.name, labels=wire._map(msg.labels))
