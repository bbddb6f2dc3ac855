"""`splitsched simulate --cluster`: the core offline, on files shaped like kubectl output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from splitsched import cli
from tests.support import pipes

ROOT = Path(__file__).resolve().parents[2]


def run(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[dict[str, object]], str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def test_sample_cluster_places_what_fits_and_explains_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines, _ = run(
        ["simulate", "--cluster", str(ROOT / "examples" / "sample-cluster.yaml")], capsys
    )
    assert code == 0
    summary = lines[-1]["summary"]
    assert isinstance(summary, dict)
    assert summary["pending"] == 300 and summary["nodes"] == 40 and summary["bound_before"] == 60
    per_pod = {str(line["pod"]): line for line in lines[:-1]}
    assert len(per_pod) == 300
    assert per_pod["batch/huge-0"]["node"] is None
    assert "Insufficient cpu" in str(per_pod["batch/huge-0"]["message"])
    assert per_pod["batch/lost-0"]["node"] is None
    assert per_pod["shop/web-0"]["node"] is not None
    # cordoned nodes get nothing new
    assert all(line["node"] not in ("node-05", "node-17") for line in lines[:-1])


def test_all_pending_schedules_other_schedulers_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {
        "kind": "List",
        "items": [
            {
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "1", "pods": "10"}},
            },
            {
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "d", "uid": "u1"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]},
            },
        ],
    }
    f = tmp_path / "c.json"
    f.write_text(json.dumps(doc))
    _, lines, _ = run(["simulate", "--cluster", str(f)], capsys)
    assert lines[-1]["summary"]["pending"] == 0  # type: ignore[index]
    _, lines, _ = run(["simulate", "--cluster", str(f), "--all-pending"], capsys)
    assert lines[0] == {"pod": "d/p", "node": "n1", "reasons": {}}


def test_gated_pods_are_left_out_as_the_scheduler_leaves_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def pending(name: str, gates: list[str]) -> dict[str, object]:
        spec = {
            "schedulerName": "splitsched",
            "schedulingGates": [{"name": g} for g in gates],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
        }
        return {"kind": "Pod", "metadata": {"name": name, "namespace": "d"}, "spec": spec}

    node = {"kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "1", "pods": "10"}}}  # fmt: skip
    doc = {"kind": "List", "items": [node, pending("gated", ["example.com/q"]), pending("p", [])]}
    f = tmp_path / "c.json"
    f.write_text(json.dumps(doc))
    _, lines, _ = run(["simulate", "--cluster", str(f), "--all-pending"], capsys)
    assert lines[:-1] == [{"pod": "d/p", "node": "n1", "reasons": {}}]
    assert lines[-1]["summary"]["pending"] == 1  # type: ignore[index]


def test_malformed_input_exits_2_naming_object_and_field(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "kind: List\nitems:\n- kind: Pod\n  metadata: {name: web, namespace: shop}\n"
        "  spec:\n    containers:\n    - name: c\n      resources: {requests: {cpu: abc}}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "splitsched.cli", "simulate", "--cluster", str(f)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert "shop/web" in proc.stderr and "spec.containers[0].resources.requests.cpu" in proc.stderr
    assert "abc" in proc.stderr


def test_missing_file_and_bad_config_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["simulate", "--cluster", str(tmp_path / "nope.yaml")]) == 2
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("profiles: [{plugins: {filter: {enabled: [{name: Bogus}]}}}]\n")
    sample = str(ROOT / "examples" / "sample-cluster.yaml")
    assert cli.main(["simulate", "--cluster", sample, "--config", str(cfg)]) == 2
    assert "Bogus" in capsys.readouterr().err


def test_simulate_takes_a_kube_scheduler_configuration_as_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo is refused as kube-scheduler refuses it; fields that do not apply are noted
    once, on stderr and in the summary."""
    sample = str(ROOT / "examples" / "sample-cluster.yaml")
    cfg = tmp_path / "cfg.yaml"
    head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    cfg.write_text(head + "percentageOfNodesToScor: 50\n")
    assert cli.main(["simulate", "--cluster", sample, "--config", str(cfg)]) == 2
    assert (
        'strict decoding error: unknown field "percentageOfNodesToScor"' in capsys.readouterr().err
    )
    cfg.write_text(head + "percentageOfNodesToScore: 50\nprofiles: [{schedulerName: splitsched}]\n")
    code, lines, err = run(["simulate", "--cluster", sample, "--config", str(cfg)], capsys)
    assert code == 0
    notes = lines[-1]["summary"]["config_notes"]  # type: ignore[index]
    assert notes == [
        "percentageOfNodesToScore: ignored: splitsched scores every feasible node, as "
        "kube-scheduler does with 100"
    ]
    assert err.count("note: scheduler config: percentageOfNodesToScore: ignored") == 1


def test_simulate_needs_a_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate"]) == 2


def test_simulate_reads_the_storage_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Claims, volumes, classes and CSINodes in the dump are the view's: a pod's claim is
    found, its WaitForFirstConsumer volume decides the node; a claim the dump lacks is
    named, as the scheduler would."""
    node: dict[str, Any] = {"kind": "Node", "status": {"allocatable": {"cpu": "4", "pods": "10"}}}
    spec: dict[str, Any] = {"schedulerName": "splitsched", "containers": [{"name": "c"}]}
    pod: dict[str, Any] = {"kind": "Pod", "spec": spec}
    doc = {"kind": "List", "items": [
        {**node, "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}}},
        {**node, "metadata": {"name": "n2", "labels": {"kubernetes.io/hostname": "n2"}}},
        {"kind": "StorageClass", "metadata": {"name": "local"},
         "provisioner": "kubernetes.io/no-provisioner",
         "volumeBindingMode": "WaitForFirstConsumer"},
        {"kind": "PersistentVolume", "metadata": {"name": "pv"},
         "spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"},
                  "accessModes": ["ReadWriteOnce"], "nodeAffinity": {"required": {
                      "nodeSelectorTerms": [{"matchExpressions": [{
                          "key": "kubernetes.io/hostname", "operator": "In",
                          "values": ["n2"]}]}]}}},
         "status": {"phase": "Available"}},
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "d"},
         "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "1Gi"}}}},
        {**pod, "metadata": {"name": "db", "namespace": "d", "uid": "u1"},
         "spec": {**spec, "volumes": [
             {"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}},
        {**pod, "metadata": {"name": "lost", "namespace": "d", "uid": "u2"},
         "spec": {**spec, "volumes": [
             {"name": "v", "persistentVolumeClaim": {"claimName": "gone"}}]}},
    ]}  # fmt: skip
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc))
    code, lines, _ = run(["simulate", "--cluster", str(path)], capsys)
    per_pod = {str(line["pod"]): line for line in lines[:-1]}
    assert code == 0 and per_pod["d/db"]["node"] == "n2"
    assert per_pod["d/lost"]["message"] == (
        '0/2 nodes are available: persistentvolumeclaim "gone" not found. no new claims to '
        "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
        "scheduling."
    )


def test_a_malformed_storage_object_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {"kind": "List", "items": [{"kind": "PersistentVolume", "metadata": {"name": "pv"},
                                      "spec": {"capacity": {"storage": "lots"}}}]}  # fmt: skip
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc))
    code, _, err = run(["simulate", "--cluster", str(path)], capsys)
    assert code == 2
    assert "items[0] (PersistentVolume pv): spec.capacity.storage: invalid quantity" in err


SAMPLE_CLUSTER = ROOT / "examples" / "sample-cluster.yaml"


def test_a_reader_that_leaves_early_ends_the_output_quietly() -> None:
    """`splitsched simulate ... | head -1`: the rest of the output has nowhere to go. No
    BrokenPipeError traceback, and 141, as a shell reports for such a tool."""
    first, code, err = pipes.head_one(
        [sys.executable, "-m", "splitsched.cli", "simulate", "--cluster", str(SAMPLE_CLUSTER)]
    )
    assert code == cli.EXIT_CLOSED_PIPE, err
    assert json.loads(first)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
