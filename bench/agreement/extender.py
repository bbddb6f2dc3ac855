"""kube-scheduler's feasible set, recorded by a pass-through scheduler extender.

kube-scheduler calls an extender's filter verb with the nodes that passed every filter
plugin (``findNodesThatPassExtenders``), before scoring and before its one-feasible-node
shortcut, so the names it sends are exactly the pod's feasible set. This extender keeps
them and answers that every node passes, so it changes nothing kube decides (a pod that
fits nowhere never reaches it: then its feasible set is empty). With
``percentageOfNodesToScore: 100`` kube-scheduler filters every node, not a sample.

The wire format is ``k8s.io/kube-scheduler/extender/v1``'s ``ExtenderArgs`` /
``ExtenderFilterResult``: Go structs without JSON tags, so the keys are the field names
(``Pod``, ``NodeNames``). ``nodeCacheCapable: true`` makes kube send names, not Node objects.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FILTER_VERB = "filter"


class FeasibleSets:
    """Pod (namespace, name) -> the node names kube-scheduler last found feasible."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sets: dict[tuple[str, str], frozenset[str]] = {}
        self.calls = 0

    def record(self, args: Mapping[str, Any]) -> list[str]:
        """Keep one filter call's nodes; returns them (every node passes)."""
        meta = (args.get("Pod") or {}).get("metadata") or {}
        names = list(args.get("NodeNames") or [])
        with self._lock:
            self.calls += 1
            self._sets[(meta.get("namespace", ""), meta.get("name", ""))] = frozenset(names)
        return names

    def take(self, namespace: str, name: str) -> frozenset[str] | None:
        """The pod's feasible set (forgotten after), or None if kube never called us for it."""
        with self._lock:
            return self._sets.pop((namespace, name), None)


def filter_answer(names: list[str]) -> dict[str, Any]:
    """ExtenderFilterResult: every node passes."""
    return {"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}


class _Handler(BaseHTTPRequestHandler):
    sets: FeasibleSets

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            args = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/").rsplit("/", 1)[-1] != FILTER_VERB:
                raise ValueError(f"unexpected verb {self.path}")
            body = json.dumps(filter_answer(self.sets.record(args))).encode()
            status = 200
        except (ValueError, AttributeError) as exc:
            body = json.dumps({"Error": f"agreement extender: {exc}"}).encode()
            status = 400
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: one line per pod would drown the harness's output."""


class Extender:
    """The HTTP server on a loopback port, serving from a daemon thread."""

    def __init__(self) -> None:
        self.sets = FeasibleSets()
        handler = type("Handler", (_Handler,), {"sets": self.sets})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def config(self) -> dict[str, Any]:
        """The entry of KubeSchedulerConfiguration.extenders that calls this server."""
        return {
            "urlPrefix": self.url,
            "filterVerb": FILTER_VERB,
            "nodeCacheCapable": True,
            "enableHTTPS": False,
            "httpTimeout": "10s",
        }

    def start(self) -> Extender:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
