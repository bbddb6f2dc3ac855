"""Top-level pytest configuration: registers the shared fixtures for every tier.

The control-plane fixtures live in ``tests/support/fixtures.py`` (``control_plane``,
``kube_api``, ``core_api``, ``namespace``); they only start a control plane when a test asks
for one. ``exporter`` (tracing on for one test, spans kept in memory) lives in
``tests/support/spans.py``.
"""

import os

pytest_plugins = ["tests.support.fixtures", "tests.support.spans"]

# The real-node tier needs root and changes host-wide things (a bridge, iptables, cgroups,
# ports 10250 and 53): only `make test-realnode` (SPLITSCHED_REALNODE=1) collects it.
# CI runs it right after `make test` (.ci/run).
collect_ignore = [] if os.environ.get("SPLITSCHED_REALNODE") == "1" else ["realnode"]
