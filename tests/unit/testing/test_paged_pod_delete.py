"""Unit tests of emptying a namespace a page of pods at a time (splitsched.testing.kube)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from splitsched.testing import kube


class _Response:
    data = b"{}"

    def release_conn(self) -> None:
        pass


class _Listing:
    def __init__(self, items: list[str]) -> None:
        self.items = items


class FakeCore:
    """Pods deleted `page` at a time, after answering the statuses in `failures` first."""

    def __init__(self, pods: int, failures: list[int]) -> None:
        self.pods = [f"p{i}" for i in range(pods)]
        self.failures = list(failures)
        self.limits: list[int] = []

    def delete_collection_namespaced_pod(self, namespace: str, **kwargs: Any) -> _Response:
        if self.failures:
            raise ApiException(status=self.failures.pop(0))
        self.limits.append(kwargs["limit"])
        del self.pods[: kwargs["limit"]]
        return _Response()

    def list_namespaced_pod(self, namespace: str, **kwargs: Any) -> _Listing:
        return _Listing(self.pods[: kwargs.get("limit")])


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("splitsched.testing.kube.time.sleep", lambda _s: None)


def test_pods_go_a_page_at_a_time_until_none_is_left() -> None:
    core = FakeCore(2500, [])
    kube._delete_pods_in_pages(core, "ns", timeout=10)
    assert core.pods == []
    assert core.limits == [kube.POD_DELETE_PAGE] * 3


def test_a_5xx_or_429_is_retried_and_a_404_means_nothing_to_delete() -> None:
    core = FakeCore(10, [504, 429, 500])
    kube._delete_pods_in_pages(core, "ns", timeout=10)
    assert core.pods == []
    gone = FakeCore(10, [404])
    kube._delete_pods_in_pages(gone, "ns", timeout=10)
    assert len(gone.pods) == 10


def test_a_refusal_is_raised_and_so_is_a_5xx_past_the_deadline() -> None:
    with pytest.raises(ApiException) as excinfo:
        kube._delete_pods_in_pages(FakeCore(10, [403]), "ns", timeout=10)
    assert excinfo.value.status == 403
    with pytest.raises(ApiException) as excinfo:
        kube._delete_pods_in_pages(FakeCore(10, [503] * 3), "ns", timeout=-1)
    assert excinfo.value.status == 503
