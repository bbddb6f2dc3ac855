"""Run a Python module as a child that dies with its parent: `python -m
splitsched.launch.orphanguard MODULE ARGS...`.

The local services (`splitsched up`, the test stack) are started this way instead of
through subprocess's preexec_fn: preexec_fn forces a plain fork() of the parent, and when
that process runs gRPC servers or channels (an in-test OTLP receiver, say), gRPC's fork
handlers can break the child's event engine before it ever reaches exec ("epoll_wait
error: Bad file descriptor"). Here the child asks the kernel itself, after exec, to be
sent SIGTERM when its parent dies, so neither a killed `splitsched up` nor a test run
leaves processes behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import runpy
import signal
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m splitsched.launch.orphanguard MODULE [ARGS...]")
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
