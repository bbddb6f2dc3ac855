"""Round trips DRA objects -> proto -> ClusterEvent bytes -> DRA objects through
`splitsched.wire_devices`, and the None-vs-empty conventions."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched import wire_devices
from splitsched.core import models
from splitsched.core.devices import model, semver
from splitsched.v1 import types_pb2, watcher_pb2

text = st.text(max_size=8)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=12)
terms = st.builds(
    models.NodeSelectorTerm,
    match_expressions=st.lists(
        st.builds(models.NodeSelectorRequirement, names, st.sampled_from(["In", "Gt"]),
                  st.lists(text, max_size=2).map(tuple)),
        max_size=2,
    ).map(tuple),
)  # fmt: skip
maybe_terms = st.none() | st.lists(terms, max_size=2).map(tuple)
attributes = (
    st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.booleans()
    | text
    | st.sampled_from(["1.2.3", "0.0.1-rc.1", "10.0.0"]).map(semver.parse)
)
fractions = st.fractions(min_value=0, max_value=2**70)
amounts = st.dictionaries(names, fractions, max_size=2)
few_texts = st.lists(text, max_size=2).map(tuple)
few_names = st.lists(names, max_size=2).map(tuple)
counter_sets = st.lists(st.builds(model.CounterSet, names, amounts), max_size=2).map(tuple)
devices = st.builds(
    model.Device,
    name=names,
    attributes=st.dictionaries(names, attributes, max_size=3),
    capacity=amounts,
    node_name=text,
    node_selector=maybe_terms,
    all_nodes=st.booleans(),
    taints=st.lists(st.builds(model.DeviceTaint, names, text, text), max_size=2).map(tuple),
    consumes_counters=counter_sets,
    allow_multiple_allocations=st.booleans(),
    binding_conditions=few_names,
    binding_failure_conditions=few_names,
    binds_to_node=st.booleans(),
)
slices = st.builds(
    model.ResourceSlice,
    name=names, driver=names, pool=names, generation=st.integers(-1, 2**40),
    slice_count=st.integers(1, 9), node_name=text, node_selector=maybe_terms,
    all_nodes=st.booleans(), per_device_node_selection=st.booleans(),
    devices=st.lists(devices, max_size=3).map(tuple), resource_version=text, invalid_reason=text,
    shared_counters=counter_sets,
)  # fmt: skip
classes = st.builds(
    model.DeviceClass, name=names, selectors=st.lists(text, max_size=2).map(tuple),
    config=st.lists(text, max_size=2).map(tuple), resource_version=text,
)  # fmt: skip
tolerations = st.builds(
    model.DeviceToleration, text, st.sampled_from(["Equal", "Exists", ""]), text, text
)
specs = st.builds(
    model.RequestSpec, name=names, device_class=names, selectors=few_texts,
    mode=st.sampled_from(["ExactCount", "All"]), count=st.integers(0, 32),
    admin_access=st.booleans(), tolerations=st.lists(tolerations, max_size=2).map(tuple),
    capacity_requests=amounts,
)  # fmt: skip
requests = st.builds(
    model.DeviceRequest, name=names, exactly=st.none() | specs,
    first_available=st.lists(specs, max_size=2).map(tuple),
)  # fmt: skip
allocations = st.builds(
    model.Allocation,
    results=st.lists(
        st.builds(model.DeviceResult, names, names, names, names, st.booleans()), max_size=3
    ).map(tuple),
    node_selector=maybe_terms,
    config=st.lists(
        st.builds(model.AllocatedConfig, text, st.lists(names, max_size=2).map(tuple), text),
        max_size=2,
    ).map(tuple),
)
claims = st.builds(
    model.ResourceClaim,
    namespace=names, name=names, uid=text, resource_version=text,
    requests=st.lists(requests, max_size=2).map(tuple),
    constraints=st.lists(
        st.builds(model.MatchAttribute, text, few_names, text), max_size=2
    ).map(tuple),
    config=st.lists(st.builds(model.ClaimConfig, few_names, text), max_size=2).map(tuple),
    allocation=st.none() | allocations,
    reserved_for=st.lists(
        st.builds(model.ConsumerRef, names, names, text, text), max_size=2
    ).map(tuple),
    deleting=st.booleans(), invalid_reason=text,
    owner=st.none() | st.builds(models.OwnerRef, text, text, text, st.booleans()),
)  # fmt: skip


def through_the_wire(obj: wire_devices.DeviceObject) -> wire_devices.DeviceObject | None:
    event = watcher_pb2.ClusterEvent(sequence=1, type=watcher_pb2.ClusterEvent.ADDED)
    if isinstance(obj, model.ResourceSlice):
        event.resource_slice.CopyFrom(wire_devices.slice_to_proto(obj))
    elif isinstance(obj, model.DeviceClass):
        event.device_class.CopyFrom(wire_devices.class_to_proto(obj))
    else:
        event.resource_claim.CopyFrom(wire_devices.claim_to_proto(obj))
    return wire_devices.devices_from_event(
        watcher_pb2.ClusterEvent.FromString(event.SerializeToString())
    )


@settings(max_examples=150, deadline=None)
@given(slices | classes | claims)
def test_round_trip(obj: wire_devices.DeviceObject) -> None:
    assert through_the_wire(obj) == obj


@settings(max_examples=100, deadline=None)
@given(st.builds(model.ClaimWrite, names, names, text, st.none() | allocations))
def test_claim_writes_round_trip(write: model.ClaimWrite) -> None:
    """A decision's ClaimWrite, to the binder: "allocated already" (None) stays None."""
    msg = types_pb2.ClaimWrite()
    wire_devices.claim_write_to_proto(write, msg)
    again = types_pb2.ClaimWrite.FromString(msg.SerializeToString())
    assert wire_devices.claim_write_from_proto(again) == write


def test_none_and_empty_are_distinct_on_the_wire() -> None:
    anywhere = model.ResourceSlice("s", "d", "p", all_nodes=True)
    nowhere = model.ResourceSlice("s", "d", "p", node_selector=())
    assert through_the_wire(anywhere) == anywhere
    assert through_the_wire(nowhere) == nowhere
    unallocated = model.ResourceClaim("ns", "c")
    allocated_nothing = model.ResourceClaim("ns", "c", allocation=model.Allocation(()))
    assert through_the_wire(unallocated) == unallocated
    assert through_the_wire(allocated_nothing) == allocated_nothing
    exact = model.ResourceSlice(
        "s", "d", "p", devices=(model.Device("g", capacity={"d/m": Fraction(1, 3)}),)
    )
    assert through_the_wire(exact) == exact


def test_other_objects_are_not_devices() -> None:
    event = watcher_pb2.ClusterEvent(sequence=1)
    event.node.name = "n"
    assert wire_devices.devices_from_event(event) is None
