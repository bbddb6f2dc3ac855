"""The services' log setup."""

from __future__ import annotations

import logging

from splitsched.runtime import logs


def test_the_cel_librarys_per_device_warnings_are_kept_out() -> None:
    """A bad DeviceClass selector makes the CEL library warn once per device judged; the
    pod's reason says it once, so only its errors reach the log."""
    root, cel_logger = logging.getLogger(), logging.getLogger("cel")
    saved = (root.handlers[:], root.level, cel_logger.level)
    try:
        logs.setup("scheduler")
        assert not cel_logger.isEnabledFor(logging.WARNING)
        assert cel_logger.isEnabledFor(logging.ERROR)
        assert logging.getLogger("splitsched").isEnabledFor(logging.INFO)
    finally:
        root.handlers[:], _, _ = saved
        root.setLevel(saved[1])
        cel_logger.setLevel(saved[2])
