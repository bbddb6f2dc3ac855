"""The agreement harness's pure parts (``bench.agreement``): feature sets, scenarios that
the API server accepts and that each run renders the same way, the per-pod checks, the
known-difference classifier and the report. The runs themselves are in
tests/e2e/test_agreement.py."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from bench.agreement import __main__ as cli
from bench.agreement import cluster, compare, features, known, report, scenario, storage
from bench.agreement.compare import PodOutcome

CPU = "0/2 nodes are available: 2 Insufficient cpu."
KUBE_TAIL = (
    " no new claims to deallocate, preemption: 0/3 nodes are available: "
    "1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
)


# -- features ------------------------------------------------------------------------------


def test_features_default_and_edits() -> None:
    assert features.parse("") == features.DEFAULT_FEATURES
    assert features.parse("-namespaces") == features.DEFAULT_FEATURES - {"namespaces"}
    assert features.parse("-storage") == features.DEFAULT_FEATURES - {"storage", "csi-limits"}
    assert features.parse("-taints,-cordon") == features.DEFAULT_FEATURES - {"taints", "cordon"}
    assert features.parse("resources,ports") == {"resources", "ports"}
    assert features.parse("all") == set(features.FEATURES)


@pytest.mark.parametrize(
    ("text", "error"),
    [("+nope", "unknown feature 'nope'"), ("ports,csi-limits", "'csi-limits' needs 'storage'")],
)
def test_features_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        features.parse(text)


# -- scenarios -----------------------------------------------------------------------------


def test_a_seed_makes_one_scenario() -> None:
    assert scenario.build(7) == scenario.build(7)
    assert scenario.build(7).pods != scenario.build(8).pods
    small = scenario.build(7, nodes=3, pods=5)
    assert small.node_names == ["n00", "n01", "n02"] and len(small.pods) == 5


def test_features_off_generate_nothing_of_theirs() -> None:
    plain = scenario.build(3, pods=80, chosen=frozenset({"resources"}))
    specs = json.dumps([p["spec"] for p in plain.pods])
    absent = ("affinity", "tolerations", "topologySpreadConstraints", "hostPort", "volumes")
    for field in (*absent, "schedulingGates"):
        assert field not in specs
    assert not any(n["spec"].get("taints") for n in plain.nodes)
    assert plain.namespaces == {"@ns0": {}} and plain.volumes == storage.Storage()


def _without(pods: tuple[dict[str, Any], ...], *fields: str) -> list[dict[str, Any]]:
    """The pods with those spec fields, namespaces and namespaceSelectors left out."""
    out = json.loads(json.dumps(pods))
    for pod in out:
        for field in fields:
            pod["spec"].pop(field, None)
        pod["metadata"]["namespace"] = "@ns0"
        for kind in (pod["spec"].get("affinity") or {}).values():
            for term in kind.get("requiredDuringSchedulingIgnoredDuringExecution", []):
                if isinstance(term, dict):
                    term.pop("namespaceSelector", None)
    return list(out)


def test_later_features_leave_the_rest_of_the_scenario_as_it_was() -> None:
    """Namespaces, storage and gates draw from their own random streams: switching one
    on or off leaves the seed's other pods as they were."""
    full = scenario.build(5)
    assert any("schedulingGates" in p["spec"] for p in full.pods)
    assert any("volumes" in p["spec"] for p in full.pods)
    assert {p["metadata"]["namespace"] for p in full.pods} == {"@ns0", "@ns1", "@ns2"}
    for left_out, fields in (
        ("-gates", ("schedulingGates",)),
        ("-namespaces", ()),
        ("-storage", ("volumes",)),
    ):
        fewer = scenario.build(5, chosen=features.parse(left_out))
        assert fewer.nodes == full.nodes, left_out
        assert _without(fewer.pods, *fields) == _without(full.pods, *fields), left_out
    assert scenario.build(5, chosen=features.parse("-storage")).volumes == storage.Storage()
    kinds = Counter(o["kind"] for o in full.volumes.objects)
    assert kinds["CSINode"] == len(full.nodes) and kinds["StorageClass"] == 2


@pytest.mark.parametrize("seed", range(1, 41))
def test_scenarios_are_what_the_api_server_accepts(seed: int) -> None:
    """Found by running: two taints with one key and effect, or a matchFields term with
    two values, are refused with 422."""
    scene = scenario.build(seed, nodes=12, pods=40, chosen=frozenset(features.FEATURES))
    for node in scene.nodes:
        taints = [(t["key"], t["effect"]) for t in node["spec"].get("taints", [])]
        assert len(taints) == len(set(taints)), node["metadata"]["name"]
    names = set(scene.node_names)
    for pod in scene.pods:
        text = json.dumps(pod)
        for term in _node_terms(pod):
            for field in term.get("matchFields", []):
                assert len(field["values"]) == 1, text
        refs = {s[1:] for s in _strings(pod) if s.startswith("@n") and not s.startswith("@ns")}
        assert refs <= names, text


def _strings(obj: object) -> list[str]:
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return [obj] if isinstance(obj, str) else []


def _node_terms(pod: dict[str, Any]) -> list[dict[str, Any]]:
    node_affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return list(required.get("nodeSelectorTerms", [])) + [p["preference"] for p in preferred]


def test_render_gives_each_run_its_own_objects() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p00", "namespace": "@ns1"},
        "spec": {
            "nodeSelector": {cluster.HOSTNAME_LABEL: "@n03"},
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c01"}}],
            "containers": [{"image": "docker.io/library/nginx:1.27"}],
        },
    }
    out = scenario.run_pod(pod, "ag9-k", {"@ns1": "ns-x"}, "agreement-kube")
    assert out["metadata"] == {"name": "p00", "namespace": "ns-x"}
    assert out["spec"]["nodeSelector"] == {cluster.HOSTNAME_LABEL: "ag9-k-n03"}
    assert out["spec"]["volumes"] == pod["spec"]["volumes"]  # claims are namespaced
    assert out["spec"]["schedulerName"] == "agreement-kube"
    assert pod["spec"]["nodeSelector"][cluster.HOSTNAME_LABEL] == "@n03"  # a copy
    assert scenario.render({"storageClassName": "@sc-bound"}, "p", {}) == {
        "storageClassName": "p-sc-bound"
    }
    node = scenario.run_node(scenario.build(1).nodes[2], "ag1-s")
    assert node["metadata"]["name"] == "ag1-s-n02"
    assert node["metadata"]["labels"][cluster.HOSTNAME_LABEL] == "ag1-s-n02"
    assert scenario.local_node("ag1-s", "ag1-s-n02") == "n02"
    assert scenario.local_node("ag1-s", None) is None


# -- checks --------------------------------------------------------------------------------


def bound(node: str, *feasible: str) -> PodOutcome:
    return PodOutcome("p00", node, feasible=frozenset(feasible))


def pending(message: str) -> PodOutcome:
    return PodOutcome("p00", None, message=message, feasible=frozenset())


@pytest.mark.parametrize(
    ("kube", "ours", "failed"),
    [
        # Different nodes of one feasible set: a tie-break, not a disagreement.
        (bound("n1", "n1", "n2"), bound("n2", "n1", "n2"), []),
        (bound("n1", "n1", "n2"), bound("n1", "n1"), ["feasible"]),
        (bound("n1", "n1"), bound("n2", "n2"), ["feasible", "placement"]),
        (bound("n1", "n1"), pending("0/2 nodes are available."), ["binds", "feasible"]),
        (pending(CPU), pending(CPU), []),
        (pending(CPU), pending("0/2 nodes are available: 2 Insufficient memory."), ["message"]),
        (bound("n1", "n1"), PodOutcome("p00", None, timed_out=True), list(compare.CHECKS)),
        # kube-scheduler bound it but never asked the extender: unknown, so not agreed.
        (PodOutcome("p00", "n1"), bound("n1", "n1"), ["feasible", "placement"]),
    ],
)  # fmt: skip
def test_checks(kube: PodOutcome, ours: PodOutcome, failed: list[str]) -> None:
    verdict = compare.verdicts([kube], [ours])[0]
    assert verdict.failed == failed
    assert verdict.agrees == (not failed)


@pytest.mark.parametrize(
    ("kube_kept", "our_kept", "verdict"),
    [(None, None, None), (True, True, True), (True, False, False), (False, True, False)],
)
def test_gated_pods_must_be_left_alone_by_both(
    kube_kept: bool | None, our_kept: bool | None, verdict: bool | None
) -> None:
    kube = PodOutcome("p00", "n1", feasible=frozenset({"n1"}), gate_kept=kube_kept)
    ours = PodOutcome("p00", "n1", feasible=frozenset({"n1"}), gate_kept=our_kept)
    assert compare.checks(kube, ours)["gated"] is verdict


def test_verdicts_need_the_same_pods() -> None:
    with pytest.raises(ValueError, match="different pods"):
        compare.verdicts([bound("n1", "n1")], [])


# -- known differences ---------------------------------------------------------------------

UNBOUND = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
NOT_HELPFUL = (
    " no new claims to deallocate, preemption: 0/3 nodes are available: "
    "3 Preemption is not helpful for scheduling."
)


@pytest.mark.parametrize(
    ("kube_message", "our_message", "known_id"),
    [
        # kube's own bug after a PreFilter rejection; ours says what its PostFilter would.
        (UNBOUND + " not found", UNBOUND + NOT_HELPFUL, "kube-not-found"),
        # Not the PostFilter words kube would have written: not explained.
        (UNBOUND + " not found", UNBOUND, None),
        (UNBOUND + " not found", UNBOUND + NOT_HELPFUL.replace("3 Pre", "2 Pre"), None),
        (
            "0/3 nodes are available: pod affinity terms conflict. not found",
            UNBOUND + NOT_HELPFUL,
            None,
        ),
        # The PostFilter part (once a known difference of ours, now fixed) must agree.
        ("0/3 nodes are available: 3 Insufficient cpu." + KUBE_TAIL, CPU, None),
        (
            "0/3 nodes are available: 3 node(s) had untolerated taint(s).",
            "0/3 nodes are available: 3 node(s) had untolerated taint {a: b}.",
            None,
        ),
    ],
)  # fmt: skip
def test_known_differences(kube_message: str, our_message: str, known_id: str | None) -> None:
    verdict = known.classify(compare.verdicts([pending(kube_message)], [pending(our_message)])[0])
    assert not verdict.agrees
    assert verdict.known == known_id


def test_only_message_differences_can_be_kubes_bug() -> None:
    kube = PodOutcome("p00", None, message=UNBOUND + " not found", feasible=frozenset())
    ours = PodOutcome("p00", "n1", feasible=frozenset({"n1"}))
    assert known.classify(compare.verdicts([kube], [ours])[0]).known is None


def test_every_known_difference_says_whose_it_is() -> None:
    assert {d.whose for d in known.KNOWN} <= {known.KUBE, known.OURS}
    assert known.kube_bug("kube-not-found") and not known.kube_bug(None)
    assert not known.kube_bug("kube-not-found+something-of-ours")


# -- report --------------------------------------------------------------------------------


def test_report_counts_kube_bugs_apart_from_our_differences() -> None:
    same = compare.verdicts([bound("n1", "n1")], [bound("n1", "n1")])
    kube_bug = known.classify(
        compare.verdicts([pending(UNBOUND + " not found")], [pending(UNBOUND + NOT_HELPFUL)])[0]
    )
    wrong = compare.verdicts([bound("n1", "n1")], [bound("n2", "n2")])
    results = [
        compare.SeedResult(seed=1, nodes=3, pods=2, verdicts=[*same, kube_bug]),
        compare.SeedResult(seed=2, nodes=3, pods=1, verdicts=wrong),
        compare.SeedResult(seed=3, nodes=3, pods=0, error="API error 422: no"),
    ]
    text = report.summary(results)
    assert "agreement: 1/3 pods (33.3%) over 3 seed(s)" in text
    assert "documented kube-scheduler bug: 2/3 pods (66.7%); splitsched differs on 1" in text
    assert "known difference kube-not-found: 1 pod(s) in 1 seed(s) [1]" in text
    assert "UNEXPLAINED: 1 pod(s), seeds [2]" in text
    assert "seed 3 did not complete: API error 422: no" in text
    assert "1 by kube-scheduler's known bug(s)" in report.seed_line(results[0])
    assert "n2 [1 feasible]" in report.seed_table(results[1])
    doc = report.to_json(results, {"command": "x"})
    assert doc["summary"]["agreed"] == 1 and doc["summary"]["unexplained"] == 1
    assert doc["summary"]["agreed_or_kube_bug"] == 2
    assert doc["seeds"][0]["verdicts"][1]["known"] == "kube-not-found"
    assert doc["seeds"][1]["verdicts"][0]["failed"] == ["feasible", "placement"]
    text = report.dumps(doc)
    assert json.loads(text) == json.loads(json.dumps(doc))
    assert '{"pod":"p00","agrees":false,"failed":["feasible","placement"]' in text


# -- CLI -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["--features", "+nope"], ["--nodes", "60"], ["--seeds", "0"], ["--features", "csi-limits"]],
)
def test_cli_refuses_bad_arguments_before_starting_anything(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.startswith("error: ")
