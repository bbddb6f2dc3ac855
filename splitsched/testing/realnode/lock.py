"""One real node per machine: the tier holds a machine-wide lock while it runs, because it
uses host-wide things (a bridge, iptables, cgroups, ports 10250 and 53)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from splitsched.testing.realnode.layout import LOCK_PATH


@contextmanager
def machine_lock(path: Path = LOCK_PATH) -> Iterator[None]:
    """Wait for, then hold, the machine-wide lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
