"""Top-level pytest configuration: registers the shared fixtures for every tier.

The control-plane fixtures live in ``tests/support/fixtures.py`` (``control_plane``,
``kube_api``, ``core_api``, ``namespace``); they only start a control plane when a test asks
for one. ``exporter`` (tracing on for one test, spans kept in memory) lives in
``tests/support/spans.py``.
"""

pytest_plugins = ["tests.support.fixtures", "tests.support.spans"]
