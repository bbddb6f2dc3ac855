"""A real OpenTelemetry Collector for tests: the binary scripts/get-binaries.sh builds with
the collector's builder (OTLP receiver, file exporter only), run with an OTLP/gRPC receiver
on a free port that writes every span it receives to a JSON-lines file, and a reader of
that file into the `Span`s of splitsched/testing/otlp.py.

Reading the collector's own output, not our receiver's, is the point: a change that the
real collector would refuse or read differently fails here.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from splitsched.testing import controlplane
from splitsched.testing.otlp import Link, Span

# OTLP's JSON encoding (protobuf's, but ids in hex and enums as numbers).
KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


class Collector:
    """`Collector(workdir).start()`; `endpoint` for OTEL_EXPORTER_OTLP_ENDPOINT (with
    protocol grpc), `spans()` what it has written so far, `stop()` flushes and ends it.
    Building the binary (first use only, minutes) fails loudly: no skip."""

    def __init__(self, workdir: Path) -> None:
        controlplane.ensure_binaries(("otelcol",))
        self.binary = controlplane.binary_path("otelcol")
        self.workdir = workdir
        self.port = controlplane.free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.output = workdir / "otelcol-traces.jsonl"
        self.log_path = workdir / "otelcol.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def config(self) -> dict[str, Any]:
        """OTLP/gRPC in, JSON lines out, flushed often; no telemetry port of its own (which
        would be :8888 for every collector on the machine)."""
        return {
            "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"127.0.0.1:{self.port}"}}}},
            "exporters": {"file": {"path": str(self.output), "flush_interval": "100ms"}},
            "service": {
                "telemetry": {"metrics": {"level": "none"}},
                "pipelines": {"traces": {"receivers": ["otlp"], "exporters": ["file"]}},
            },
        }

    def start(self, *, timeout: float = 30.0) -> Collector:
        path = self.workdir / "otelcol.yaml"
        path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                [str(self.binary), f"--config=file:{path}"], stdout=log, stderr=log
            )
        deadline = time.monotonic() + timeout
        while not self._listening():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"otelcol did not start:\n{self.log_tail()}")
            time.sleep(0.1)
        return self

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM: the collector drains its pipeline and the file exporter flushes."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def spans(self) -> list[Span]:
        """Every span in the exporter's file so far (a line being written is skipped)."""
        if not self.output.exists():
            return []
        out: list[Span] = []
        for line in self.output.read_text().splitlines():
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            out.extend(spans_of(doc))
        return out


def _value(v: dict[str, Any]) -> Any:
    """An OTLP JSON AnyValue (int64s are strings in JSON)."""
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return _attrs(v["kvlistValue"].get("values", []))
    for key in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if key in v:
            return v[key]
    return None


def _attrs(kvs: list[dict[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: _value(kv.get("value", {})) for kv in kvs}


def spans_of(doc: dict[str, Any]) -> Iterator[Span]:
    """The spans of one line of the file exporter (an ExportTraceServiceRequest in JSON)."""
    for rs in doc.get("resourceSpans", []):
        service = str(_attrs(rs.get("resource", {}).get("attributes", [])).get("service.name"))
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                status = s.get("status", {})
                yield Span(
                    service=service,
                    name=s["name"],
                    trace_id=s["traceId"],
                    span_id=s["spanId"],
                    parent_span_id=s.get("parentSpanId", ""),
                    kind=KINDS.get(int(s.get("kind", 0)), str(s.get("kind"))),
                    start_ns=int(s["startTimeUnixNano"]),
                    end_ns=int(s["endTimeUnixNano"]),
                    status=STATUS.get(int(status.get("code", 0)), str(status.get("code"))),
                    status_message=status.get("message", ""),
                    attributes=_attrs(s.get("attributes", [])),
                    events=[e["name"] for e in s.get("events", [])],
                    links=[
                        Link(link["traceId"], link["spanId"], _attrs(link.get("attributes", [])))
                        for link in s.get("links", [])
                    ],
                )
