"""The committed gRPC stubs are exactly what scripts/gen-proto.sh makes from proto/."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool

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


def test_documented_descriptors_are_the_stubs_files_with_comments() -> None:
    """Reflection serves descriptors.binpb in place of the stubs' own descriptors: the same
    files (protoc adds each field's json_name there), plus the comments."""
    from splitsched.runtime import reflection
    from splitsched.v1 import binder_pb2, scheduler_pb2, types_pb2, watcher_pb2

    stubs = {m.DESCRIPTOR.name for m in (binder_pb2, scheduler_pb2, types_pb2, watcher_pb2)}
    documented = reflection.documented_files()
    assert set(documented) == stubs
    for name, data in documented.items():
        served = descriptor_pb2.FileDescriptorProto.FromString(data)
        assert len(served.source_code_info.location) > 100, name
        served.ClearField("source_code_info")
        for message in served.message_type:
            _clear_json_names(message)
        registered = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(name).CopyToProto(registered)
        assert served == registered, name


def _clear_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    for f in message.field:
        f.ClearField("json_name")
    for nested in message.nested_type:
        _clear_json_names(nested)
