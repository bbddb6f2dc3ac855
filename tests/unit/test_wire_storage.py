"""Round trips storage -> proto -> ClusterEvent bytes -> storage through
`splitsched.wire_storage`, the None-vs-empty conventions, and a decision's volume writes
in a BindRequest."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched import wire_storage
from splitsched.core import models, storage
from splitsched.v1 import binder_pb2, scheduler_pb2, watcher_pb2

text = st.text(max_size=10)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=16)
versions = st.integers(min_value=0, max_value=10**9).map(str)
modes = st.lists(st.sampled_from(["ReadWriteOnce", "ReadOnlyMany", "ReadWriteOncePod"]),
                 max_size=2).map(tuple)  # fmt: skip
sizes = st.integers(min_value=0, max_value=2**63 - 1)
selectors = st.builds(
    models.LabelSelector,
    match_labels=st.dictionaries(names, text, max_size=2).map(lambda d: tuple(sorted(d.items()))),
    match_expressions=st.lists(
        st.builds(models.LabelSelectorRequirement, names, st.sampled_from(["In", "Exists"]),
                  st.lists(text, max_size=2).map(tuple)),
        max_size=2,
    ).map(tuple),
)  # fmt: skip
terms = st.builds(
    models.NodeSelectorTerm,
    match_expressions=st.lists(
        st.builds(models.NodeSelectorRequirement, names, st.sampled_from(["In", "Gt"]),
                  st.lists(text, max_size=2).map(tuple)),
        max_size=2,
    ).map(tuple),
)  # fmt: skip
claims = st.builds(
    storage.PersistentVolumeClaim,
    namespace=names, name=names, uid=text, resource_version=versions,
    storage_class_name=text, has_storage_class=st.booleans(), access_modes=modes,
    request_bytes=sizes, volume_name=text, phase=st.sampled_from(["Pending", "Bound", "Lost"]),
    selector=st.none() | selectors, selected_node=text,
    volume_mode=st.sampled_from(["Filesystem", "Block"]), invalid_reason=text,
)  # fmt: skip
volumes = st.builds(
    storage.PersistentVolume,
    name=names, uid=text, resource_version=versions,
    labels=st.dictionaries(names, text, max_size=3), storage_class_name=text,
    access_modes=modes, capacity_bytes=sizes,
    node_affinity=st.none() | st.lists(terms, max_size=2).map(tuple),
    claim_ref=st.none() | st.builds(storage.ClaimRef, names, names, text),
    phase=st.sampled_from(["Available", "Bound", "Released"]), csi_driver=text,
    volume_mode=st.sampled_from(["Filesystem", "Block"]), invalid_reason=text,
)  # fmt: skip
classes = st.builds(
    storage.StorageClass,
    name=names, resource_version=versions, provisioner=text,
    volume_binding_mode=st.sampled_from(["Immediate", "WaitForFirstConsumer"]),
    allowed_topologies=st.lists(
        st.lists(st.builds(storage.TopologySelectorRequirement, names,
                           st.lists(text, max_size=2).map(tuple)), max_size=2).map(tuple),
        max_size=2,
    ).map(tuple),
    is_default=st.booleans(),
)  # fmt: skip
csi_nodes = st.builds(
    storage.CSINode,
    name=names, resource_version=versions,
    allocatable=st.dictionaries(names, st.integers(0, 2**31 - 1), max_size=3),
    invalid_reason=text,
)  # fmt: skip


def through_event(obj: storage.StorageObject) -> storage.StorageObject | None:
    event = watcher_pb2.ClusterEvent(type=watcher_pb2.ClusterEvent.ADDED)
    if isinstance(obj, storage.PersistentVolumeClaim):
        event.pvc.CopyFrom(wire_storage.claim_to_proto(obj))
    elif isinstance(obj, storage.PersistentVolume):
        event.pv.CopyFrom(wire_storage.volume_to_proto(obj))
    elif isinstance(obj, storage.StorageClass):
        event.storage_class.CopyFrom(wire_storage.class_to_proto(obj))
    else:
        event.csi_node.CopyFrom(wire_storage.csi_node_to_proto(obj))
    data = event.SerializeToString()
    return wire_storage.storage_from_event(watcher_pb2.ClusterEvent.FromString(data))


@settings(max_examples=100, deadline=None)
@given(st.one_of(claims, volumes, classes, csi_nodes))
def test_round_trip(obj: storage.StorageObject) -> None:
    assert through_event(obj) == obj


def test_none_and_empty_are_distinct_on_the_wire() -> None:
    """A claim without a selector takes any volume; an empty one, set, too: both survive.
    A volume without node affinity fits any node; one with no terms fits none."""
    for selector in (None, models.LabelSelector()):
        c = storage.PersistentVolumeClaim("ns", "c", selector=selector)
        assert through_event(c) == c
    for affinity in (None, ()):
        v = storage.PersistentVolume("pv", node_affinity=affinity)
        assert through_event(v) == v


def test_other_objects_are_not_storage() -> None:
    event = watcher_pb2.ClusterEvent(type=watcher_pb2.ClusterEvent.ADDED)
    event.node.name = "n"
    assert wire_storage.storage_from_event(event) is None


def test_a_decisions_volume_writes_go_into_the_bind_request() -> None:
    request = binder_pb2.BindRequest()
    wire_storage.bindings_to_proto(
        [storage.VolumeBinding("ns", "data", "pv-1"), storage.VolumeBinding("ns", "scratch")],
        request.volume_bindings,
    )
    assert [(b.claim_namespace, b.claim_name, b.pv_name) for b in request.volume_bindings] == [
        ("ns", "data", "pv-1"),
        ("ns", "scratch", ""),
    ]


def test_an_outcomes_volume_bindings_come_back_as_the_decisions_writes() -> None:
    outcome = scheduler_pb2.BindingOutcome()
    writes = (storage.VolumeBinding("ns", "data", "pv-1"), storage.VolumeBinding("ns", "scratch"))
    wire_storage.bindings_to_proto(writes, outcome.volume_bindings)
    assert wire_storage.bindings_from_proto(outcome.volume_bindings, namespace="ns") == writes
    outcome.volume_bindings[1].claim_namespace = ""  # the pod's namespace
    assert wire_storage.bindings_from_proto(outcome.volume_bindings, namespace="ns") == writes
