"""The agreement harness's recording extender (``bench.agreement.extender``) over HTTP, as
kube-scheduler calls it: a filter call in ``k8s.io/kube-scheduler/extender/v1``'s JSON
(Go field names, node names only with ``nodeCacheCapable``) is recorded and every node
passes; anything else is an error kube-scheduler would log."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from bench.agreement import extender


@pytest.fixture
def server() -> Iterator[extender.Extender]:
    running = extender.Extender().start()
    yield running
    running.stop()


def post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_filter_records_the_feasible_nodes_and_passes_them_all(
    server: extender.Extender,
) -> None:
    args = {
        "Pod": {"metadata": {"namespace": "ns", "name": "p01", "uid": "u"}},
        "Nodes": None,
        "NodeNames": ["a-n00", "a-n03"],
    }
    status, answer = post(f"{server.url}/filter", json.dumps(args).encode())
    assert status == 200
    assert answer["NodeNames"] == ["a-n00", "a-n03"] and not answer["Error"]
    assert not answer["FailedNodes"] and not answer["FailedAndUnresolvableNodes"]
    assert server.sets.take("ns", "p01") == frozenset({"a-n00", "a-n03"})
    assert server.sets.take("ns", "p01") is None  # taken once
    assert server.sets.calls == 1


def test_other_verbs_and_bad_bodies_are_errors(server: extender.Extender) -> None:
    status, answer = post(f"{server.url}/prioritize", b"{}")
    assert status == 400 and "unexpected verb" in answer["Error"]
    status, answer = post(f"{server.url}/filter", b"not json")
    assert status == 400 and answer["Error"]
    assert server.sets.calls == 0


def test_the_config_points_kube_scheduler_here(server: extender.Extender) -> None:
    conf = server.config()
    assert conf["urlPrefix"] == server.url and conf["filterVerb"] == "filter"
    assert conf["nodeCacheCapable"] is True
    assert "prioritizeVerb" not in conf and "bindVerb" not in conf  # filter only
