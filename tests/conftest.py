"""Top-level pytest configuration: registers the control-plane fixtures for every tier.

The fixtures live in ``tests/support/fixtures.py`` (``control_plane``, ``kube_api``,
``core_api``, ``namespace``); they only start a control plane when a test asks for one.
"""

pytest_plugins = ["tests.support.fixtures"]
