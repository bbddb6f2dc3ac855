"""Cluster files: every Node and Pod in what `kubectl get nodes,pods -A -o yaml|json` prints,
and the storage objects (`load_storage`) of such a file.

Called by tools and tests that load a cluster from a file (`splitsched simulate`, the
demo, the invariant checks). Accepts a List, a NodeList/PodList, one object, a bare JSON
array or several YAML documents; converts strictly and names the failing item.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import yaml

from splitsched.core import models, storage
from splitsched.core.convert.fields import BadField, ConversionError, type_name
from splitsched.core.convert.nodes import node_ref, read_node
from splitsched.core.convert.pods import pod_ref, read_pod
from splitsched.core.convert.storage import read_claim, read_class, read_csi_node, read_volume

_YamlLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_T = TypeVar("_T")


def _documents(text: str) -> list[object]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except ValueError:
            pass  # YAML flow style is a superset of JSON; let the YAML parser explain
    try:
        return [d for d in yaml.load_all(text, Loader=_YamlLoader) if d is not None]
    except yaml.YAMLError as e:
        raise ConversionError("", f"invalid YAML: {e}") from None


def _kind(item: object, default: str = "") -> str:
    kind = item.get("kind") if isinstance(item, dict) else None
    return kind if isinstance(kind, str) and kind else default


def _list_items(doc: dict[str, Any], prefix: str) -> Iterator[tuple[str, str, object]]:
    """The items of a List/NodeList/PodList; an item without a kind takes the list's."""
    kind = doc["kind"]
    implied = kind[: -len("List")] if kind != "List" else ""
    items = doc.get("items")
    if items is None:
        return
    if not isinstance(items, list):
        raise ConversionError(f"{prefix}items", f"expected a list, got {type_name(items)}")
    for i, item in enumerate(items):
        yield f"{prefix}items[{i}]", _kind(item, implied), item


def _items(documents: list[object]) -> Iterator[tuple[str, str, object]]:
    """(where, kind, object) for every object, unwrapping List/NodeList/PodList."""
    many = len(documents) > 1
    for d, doc in enumerate(documents):
        prefix = f"documents[{d}]." if many else ""
        if isinstance(doc, list):  # a bare JSON array of objects
            for i, item in enumerate(doc):
                yield f"{prefix}[{i}]", _kind(item), item
            continue
        if not isinstance(doc, dict):
            raise ConversionError(prefix.rstrip(".") or "document", "expected an object")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            yield from _list_items(doc, prefix)
        else:
            yield prefix.rstrip(".") or "document", _kind(doc), doc


def load_cluster(text: str) -> tuple[list[models.Node], list[models.Pod]]:
    """Every Node and Pod in `kubectl get nodes,pods -A -o yaml|json` output (a List, a
    NodeList/PodList, one object, or several YAML documents), converted strictly. Other
    kinds are skipped. Errors name the item: `items[3] (Pod default/web): spec...`."""
    nodes: list[models.Node] = []
    pods: list[models.Pod] = []
    for where, kind, item in _items(_documents(text)):
        if kind == "Node":
            nodes.append(_strictly(read_node, item, where, "Node", node_ref))
        elif kind == "Pod":
            pods.append(_strictly(read_pod, item, where, "Pod", pod_ref))
        elif not kind:
            raise ConversionError(where, "missing kind")
    return nodes, pods


def load_storage(text: str) -> list[storage.StorageObject]:
    """Every PersistentVolumeClaim, PersistentVolume, StorageClass and CSINode in the same
    kind of file (`kubectl get pvc,pv,storageclasses,csinodes -A -o yaml`, or one dump with
    the nodes and pods too), converted strictly; other kinds are skipped."""
    readers: dict[str, Callable[[object], storage.StorageObject]] = {
        "PersistentVolumeClaim": read_claim,
        "PersistentVolume": read_volume,
        "StorageClass": read_class,
        "CSINode": read_csi_node,
    }
    return [
        _strictly(readers[kind], item, where, kind, _storage_ref)
        for where, kind, item in _items(_documents(text))
        if kind in readers
    ]


def _storage_ref(obj: object) -> str:
    """ "<kind> [<namespace>/]<name>", whatever `obj` holds."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    ns, name = meta.get("namespace"), meta.get("name")
    prefix = f"{ns}/" if isinstance(ns, str) and ns else ""
    return f"object {prefix}{name if isinstance(name, str) and name else '<unnamed>'}"


def _strictly(
    read: Callable[[object], _T],
    item: object,
    where: str,
    kind: str,
    ref: Callable[[object], str],
) -> _T:
    """`read(item)`, an error named by `where`, the kind and the item's name from `ref`
    ("pod default/web" -> "default/web")."""
    try:
        return read(item)
    except BadField as e:
        name = ref(item).partition(" ")[2]
        raise ConversionError(f"{where} ({kind} {name})", e.detail) from None
