"""Integration tier: tests against the real control plane (kube-apiserver, etcd, kwok).

The control-plane fixtures (``control_plane``, ``kube_api``, ``core_api``, ``namespace``)
come from ``tests/support/fixtures.py``, registered for the session in ``tests/conftest.py``
so tests/e2e shares the same control plane. Every test here is marked ``integration``.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
