"""Logging setup: human lines by default, JSON lines on request (`--log-json`), with the
component name and, on every line logged inside a span, its trace and span ids (the
`TraceContextFilter` reads OpenTelemetry's current span; with tracing off there is none).

Called once by each service's `main`."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson
from opentelemetry import trace


class TraceContextFilter(logging.Filter):
    """Adds `trace_id` and `span_id` (hex, as OTLP backends show them) to records logged
    while a span is current, so a log line can be found from its trace and back."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            record.trace_id = format(ctx.trace_id, "032x")
            record.span_id = format(ctx.span_id, "016x")
        return True


class HumanFormatter(logging.Formatter):
    """`time level component logger: message [trace_id=… span_id=…]`."""

    def __init__(self, component: str) -> None:
        super().__init__(f"%(asctime)s %(levelname)s {component} %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # before any traceback
        line = super().formatMessage(record)
        trace_id = getattr(record, "trace_id", None)
        if trace_id:
            line += f" trace_id={trace_id} span_id={getattr(record, 'span_id', '')}"
        return line


class JsonFormatter(logging.Formatter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "component": self.component,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in ("trace_id", "span_id", "pod", "node"):
            value = getattr(record, key, None)
            if value:
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc).decode()


def setup(component: str, *, json_lines: bool = False, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(component) if json_lines else HumanFormatter(component))
    handler.addFilter(TraceContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    try:
        root.setLevel(level.upper())
    except ValueError:
        root.setLevel(logging.INFO)
        root.warning("unknown log level %r, using INFO", level)
    # The CEL library warns each time a selector's function raises: once per device for a
    # bad DeviceClass selector, 80k lines at 10k nodes. The pod's reason says it once.
    logging.getLogger("cel").setLevel(logging.ERROR)
