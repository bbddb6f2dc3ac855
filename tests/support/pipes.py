"""A reader that leaves early, as ``COMMAND | head -1`` does: what the command wrote first,
its exit code and its stderr. Shared by the CLI's and the kubectl plugin's tests."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


def head_one(argv: Sequence[str], *, timeout: float = 60.0) -> tuple[bytes, int, str]:
    """Run ``argv``, read one line of its stdout, close the pipe; (line, code, stderr)."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does after its line
    err = proc.stderr.read().decode()
    return first, proc.wait(timeout=timeout), err
