"""SIGTERM stops a command as Ctrl-C does: its clean-up runs, once, to the end."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

#: A command that starts "processes" (a marker file), and cleans up in ``finally``: the
#: clean-up gets a second SIGTERM halfway, which must not cut it short.
COMMAND = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from splitsched.launch.interrupts import stop_like_ctrl_c

    marker = Path(sys.argv[1])
    if sys.argv[2] == "install":
        stop_like_ctrl_c()
    try:
        marker.write_text("started")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    except KeyboardInterrupt:
        marker.write_text(marker.read_text() + " interrupted")
    finally:
        os.kill(os.getpid(), signal.SIGTERM)  # a process manager repeating itself
        time.sleep(0.2)
        marker.write_text(marker.read_text() + " cleaned")
    """
)


def run(tmp_path: Path, mode: str) -> tuple[int, str]:
    marker = tmp_path / "marker"
    done = subprocess.run(
        [sys.executable, "-c", COMMAND, str(marker), mode], timeout=20, check=False
    )
    return done.returncode, marker.read_text()


def test_sigterm_runs_the_clean_up_as_ctrl_c_does(tmp_path: Path) -> None:
    code, marker = run(tmp_path, "install")
    assert marker == "started interrupted cleaned"
    assert code == 0  # the command handled the interrupt and returned normally


def test_without_it_sigterm_skips_the_clean_up(tmp_path: Path) -> None:
    """What the demo did before: killed at once, nothing stopped."""
    code, marker = run(tmp_path, "plain")
    assert marker == "started"
    assert code == -signal.SIGTERM
