"""The committed gRPC stubs are exactly what scripts/gen-proto.sh makes from proto/."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_regenerating_stubs_changes_nothing(tmp_path: Path) -> None:
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "gen-proto.sh"), str(tmp_path)],
        check=True,
        cwd=ROOT,
        env={"PY": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
    )
    fresh = tmp_path / "splitsched" / "v1"
    committed = ROOT / "splitsched" / "v1"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in committed.iterdir() if p.name != "__pycache__")
    _, mismatch, errors = filecmp.cmpfiles(fresh, committed, names, shallow=False)
    assert not mismatch and not errors, f"stale generated stubs: {mismatch + errors}"


def test_contract_has_the_promised_services() -> None:
    from splitsched.v1 import binder_pb2, scheduler_pb2, watcher_pb2

    methods = {
        s.name: {m.name for m in s.methods}
        for mod in (binder_pb2, scheduler_pb2, watcher_pb2)
        for s in mod.DESCRIPTOR.services_by_name.values()
    }
    assert methods["Watcher"] == {"StreamClusterEvents"}
    assert {"Bind", "BindBatch", "ReportUnschedulable", "Preempt"} <= methods["Binder"]
    assert methods["Scheduler"] == {
        "ReportBindingOutcome",
        "GetPod",
        "ListPods",
        "Explain",
        "Simulate",
        "ListNodes",
        "WatchDecisions",
    }
