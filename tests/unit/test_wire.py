"""Round trips model -> proto -> model through `splitsched.wire`, and the wire conventions
the scheduler relies on (None vs empty, deleting, timestamps, PodRef keys)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched import wire, wire_cluster
from splitsched.core import models
from splitsched.core.convert import pod_from_k8s
from splitsched.v1 import types_pb2

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
QUANTITY = st.integers(min_value=0, max_value=2**63 - 1)
text = st.text(max_size=12)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=20)
str_maps = st.dictionaries(names, text, max_size=4)
resources = st.dictionaries(
    st.sampled_from(["cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu"]),
    QUANTITY,
    max_size=4,
)
# Real timestamps: whole seconds as the API server writes them, or sub-second ones after
# 1970-04 (where a float's spacing exceeds a nanosecond, so the round trip is exact).
timestamps = st.one_of(
    st.just(0.0),
    st.integers(min_value=1, max_value=4_000_000_000).map(float),
    st.floats(min_value=1e7, max_value=4e9, allow_nan=False, allow_infinity=False),
)
value_tuples = st.lists(text, max_size=3).map(tuple)

node_selector_requirements = st.builds(
    models.NodeSelectorRequirement,
    key=names,
    operator=st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    values=value_tuples,
)
node_selector_terms = st.builds(
    models.NodeSelectorTerm,
    match_expressions=st.lists(node_selector_requirements, max_size=2).map(tuple),
    match_fields=st.lists(node_selector_requirements, max_size=2).map(tuple),
)
node_affinities = st.builds(
    models.NodeAffinity,
    required=st.none() | st.lists(node_selector_terms, max_size=2).map(tuple),
    preferred=st.lists(
        st.builds(
            models.PreferredSchedulingTerm,
            weight=st.integers(min_value=0, max_value=100),
            preference=node_selector_terms,
        ),
        max_size=2,
    ).map(tuple),
)
# A proto map has no order: the decoder gives match_labels sorted by key.
label_selectors = st.builds(
    models.LabelSelector,
    match_labels=str_maps.map(lambda d: tuple(sorted(d.items()))),
    match_expressions=st.lists(
        st.builds(
            models.LabelSelectorRequirement,
            key=names,
            operator=st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
            values=value_tuples,
        ),
        max_size=2,
    ).map(tuple),
)
pod_affinity_terms = st.builds(
    models.PodAffinityTerm,
    label_selector=st.none() | label_selectors,
    topology_key=names,
    namespaces=st.lists(names, max_size=2).map(tuple),
    namespace_selector=st.none() | label_selectors,
    match_label_keys=st.lists(names, max_size=2).map(tuple),
    mismatch_label_keys=st.lists(names, max_size=2).map(tuple),
)
pod_affinities = st.builds(
    models.PodAffinity,
    required=st.lists(pod_affinity_terms, max_size=2).map(tuple),
    preferred=st.lists(
        st.builds(
            models.WeightedPodAffinityTerm,
            weight=st.integers(min_value=0, max_value=100),
            term=pod_affinity_terms,
        ),
        max_size=2,
    ).map(tuple),
)
containers = st.builds(
    models.Container,
    name=names,
    requests=resources,
    host_ports=st.lists(
        st.builds(
            models.HostPort,
            port=st.integers(min_value=1, max_value=65535),
            protocol=st.sampled_from(["TCP", "UDP", "SCTP"]),
            host_ip=st.sampled_from(["", "0.0.0.0", "10.0.0.1", "::1"]),
        ),
        max_size=2,
    ).map(tuple),
    restart_policy=st.sampled_from(["", "Always"]),
    image=st.sampled_from(["", "nginx", "registry.k8s.io/pause:3.10", "a@sha256:0f"]),
)
tolerations = st.builds(
    models.Toleration,
    key=text,
    operator=st.sampled_from(["Equal", "Exists"]),
    value=text,
    effect=st.sampled_from(["", "NoSchedule", "PreferNoSchedule", "NoExecute"]),
    toleration_seconds=st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
spread_constraints = st.builds(
    models.TopologySpreadConstraint,
    max_skew=st.integers(min_value=1, max_value=2**31 - 1),
    topology_key=names,
    when_unsatisfiable=st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
    label_selector=st.none() | label_selectors,
    min_domains=st.none() | st.integers(min_value=1, max_value=2**31 - 1),
    node_affinity_policy=st.sampled_from(["Honor", "Ignore"]),
    node_taints_policy=st.sampled_from(["Honor", "Ignore"]),
    match_label_keys=st.lists(names, max_size=2).map(tuple),
)
pods = st.builds(
    models.Pod,
    uid=text,
    namespace=names,
    name=names,
    labels=str_maps,
    annotations=str_maps,
    scheduler_name=st.sampled_from(["default-scheduler", "splitsched", ""]),
    node_name=st.sampled_from(["", "node-1"]),
    nominated_node_name=st.sampled_from(["", "node-2"]),
    priority=INT32,
    preemption_policy=st.sampled_from(["PreemptLowerPriority", "Never"]),
    containers=st.lists(containers, max_size=3).map(tuple),
    init_containers=st.lists(containers, max_size=2).map(tuple),
    overhead=resources,
    pod_requests=resources,
    node_selector=str_maps,
    node_affinity=st.none() | node_affinities,
    pod_affinity=st.none() | pod_affinities,
    pod_anti_affinity=st.none() | pod_affinities,
    tolerations=st.lists(tolerations, max_size=3).map(tuple),
    topology_spread_constraints=st.lists(spread_constraints, max_size=2).map(tuple),
    scheduling_gates=st.lists(names, max_size=2).map(tuple),
    phase=st.sampled_from(["Pending", "Running", "Unknown"]),
    deleting=st.booleans(),
    owner=st.none()
    | st.builds(models.OwnerRef, kind=text, name=text, uid=text, controller=st.booleans()),
    group=st.none()
    | st.builds(models.PodGroupRef, name=names, min_member=st.integers(0, 2**31 - 1)),
    resource_version=st.integers(min_value=0, max_value=10**12).map(str),
    creation_timestamp=timestamps,
    invalid_reason=text,
    image_volumes=st.lists(names, max_size=2).map(tuple),
    volumes=st.lists(
        st.builds(models.PodVolume, names, names, st.booleans(), st.booleans()), max_size=2
    ).map(tuple),
    resource_claims=st.lists(
        st.builds(models.PodResourceClaim, names, names, text, st.booleans()), max_size=2
    ).map(tuple),
)
nodes = st.builds(
    models.Node,
    name=names,
    labels=str_maps,
    annotations=str_maps,
    taints=st.lists(
        st.builds(
            models.Taint,
            key=names,
            value=text,
            effect=st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        ),
        max_size=3,
    ).map(tuple),
    allocatable=resources,
    unschedulable=st.booleans(),
    ready=st.booleans(),
    resource_version=st.integers(min_value=0, max_value=10**12).map(str),
    uid=text,
    images=st.lists(
        st.builds(
            models.ContainerImage,
            names=st.lists(names, max_size=3).map(tuple),
            size_bytes=QUANTITY,
        ),
        max_size=3,
    ).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(pods)
def test_pod_round_trip(pod: models.Pod) -> None:
    msg = wire.pod_to_proto(pod)
    # Through the bytes too: presence of optional/message fields must survive serialisation.
    decoded = wire.pod_from_proto(types_pb2.Pod.FromString(msg.SerializeToString()))
    assert decoded == pod


@settings(max_examples=100, deadline=None)
@given(nodes)
def test_node_round_trip(node: models.Node) -> None:
    msg = wire.node_to_proto(node)
    assert wire.node_from_proto(types_pb2.Node.FromString(msg.SerializeToString())) == node


def test_none_and_empty_are_distinct_on_the_wire() -> None:
    # required=None (no required terms: every node passes) vs required=() (set with no terms:
    # no node passes) mean opposite things in kube-scheduler's NodeAffinity.
    none_required = models.Pod(
        uid="u", namespace="ns", name="a", node_affinity=models.NodeAffinity(required=None)
    )
    empty_required = models.Pod(
        uid="u", namespace="ns", name="a", node_affinity=models.NodeAffinity(required=())
    )
    assert not wire.pod_to_proto(none_required).node_affinity.has_required
    assert wire.pod_to_proto(empty_required).node_affinity.has_required
    # An empty label selector matches every pod; a missing one matches none.
    term_empty = models.PodAffinityTerm(label_selector=models.LabelSelector(), topology_key="z")
    term_none = models.PodAffinityTerm(label_selector=None, topology_key="z")
    for term, present in ((term_empty, True), (term_none, False)):
        pod = models.Pod(
            uid="u", namespace="ns", name="a", pod_affinity=models.PodAffinity(required=(term,))
        )
        msg = types_pb2.Pod.FromString(wire.pod_to_proto(pod).SerializeToString())
        assert msg.pod_affinity.required[0].HasField("label_selector") is present
        back = wire.pod_from_proto(msg).pod_affinity
        assert back is not None
        assert (back.required[0].label_selector is not None) is present


def test_deleting_maps_to_deletion_timestamp() -> None:
    pod = models.Pod(uid="u", namespace="ns", name="a", deleting=True)
    msg = wire.pod_to_proto(pod, deletion_timestamp=1_700_000_000.0)
    assert msg.HasField("deletion_timestamp")
    assert msg.deletion_timestamp.seconds == 1_700_000_000
    assert not wire.pod_to_proto(models.Pod(uid="u", namespace="ns", name="a")).HasField(
        "deletion_timestamp"
    )
    # Epoch fallback still marks the pod terminating after serialisation.
    wired = types_pb2.Pod.FromString(wire.pod_to_proto(pod).SerializeToString())
    assert wire.pod_from_proto(wired).deleting


def test_timestamp_conversion() -> None:
    ts = wire.timestamp_from_float(1_700_000_000.25)
    assert (ts.seconds, ts.nanos) == (1_700_000_000, 250_000_000)
    assert wire.timestamp_to_float(ts) == 1_700_000_000.25
    # A float just below a whole second must not produce nanos == 1e9.
    ts = wire.timestamp_from_float(1_700_000_000.9999999999)
    assert 0 <= ts.nanos < 1_000_000_000


def test_pod_ref_helpers() -> None:
    pod = models.Pod(uid="abc", namespace="team", name="web-0")
    ref = wire.pod_ref(pod)
    assert (ref.namespace, ref.name, ref.uid) == ("team", "web-0", "abc")
    assert wire.pod_ref_key(ref) == pod.key == "team/web-0"
    assert wire.pod_key(wire.pod_to_proto(pod)) == "team/web-0"


def test_converted_api_pod_survives_the_wire_with_same_requests() -> None:
    obj = {
        "metadata": {
            "name": "web",
            "namespace": "default",
            "uid": "1234",
            "resourceVersion": "42",
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "labels": {"app": "web"},
        },
        "spec": {
            "schedulerName": "splitsched",
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}},
            ],
            "initContainers": [
                {"name": "init", "resources": {"requests": {"cpu": "2"}}},
            ],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
        },
        "status": {"phase": "Pending"},
    }
    pod = pod_from_k8s(obj)
    back = wire.pod_from_proto(types_pb2.Pod.FromString(wire.pod_to_proto(pod).SerializeToString()))
    assert back == pod
    # cpu: max(250m + 1000m (limit defaults the request), init 2000m) = 2000m.
    assert back.requests == {"cpu": 2000, "memory": 2**30 + 64 * 2**20}
    assert back.creation_timestamp == 1704164645.0


pdbs = st.builds(
    models.PodDisruptionBudget,
    namespace=names,
    name=names,
    selector=st.none() | label_selectors,
    disruptions_allowed=INT32,
)


@settings(max_examples=100, deadline=None)
@given(pdbs)
def test_pdb_round_trip(pdb: models.PodDisruptionBudget) -> None:
    msg = wire_cluster.pdb_to_proto(pdb)
    wired = types_pb2.PodDisruptionBudget.FromString(msg.SerializeToString())
    assert wire_cluster.pdb_from_proto(wired) == pdb


def test_pdb_without_selector_protects_nothing_and_empty_selector_protects_all() -> None:
    # policy/v1: a null selector selects no pods, an empty one every pod of the namespace.
    victim = models.Pod(uid="u", namespace="ns", name="a", labels={"app": "x"})
    for selector, present in ((None, False), (models.LabelSelector(), True)):
        pdb = models.PodDisruptionBudget("ns", "budget", selector, disruptions_allowed=0)
        msg = types_pb2.PodDisruptionBudget.FromString(
            wire_cluster.pdb_to_proto(pdb).SerializeToString()
        )
        assert msg.HasField("selector") is present
        assert wire_cluster.pdb_from_proto(msg).protects(victim) is present


def test_namespace_from_proto_keeps_name_and_labels() -> None:
    msg = types_pb2.Namespace(name="team-a", labels={"team": "a"}, resource_version="7")
    assert wire_cluster.namespace_from_proto(msg) == models.Namespace("team-a", {"team": "a"})
    assert wire_cluster.namespace_from_proto(types_pb2.Namespace(name="bare")).labels == {}
