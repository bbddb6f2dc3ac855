"""Optional py-spy sampling of the splitsched services while a workload runs.

Called by ``bench.sidebyside.runner`` when ``--profile-dir`` is given: one
``py-spy record --format raw`` per Python process of the contender, from the measurement's
start until its end (SIGINT makes py-spy write its file), and a short text summary of
each profile (top functions by own and by inclusive samples). py-spy is not a dependency:
``.venv/bin/pip install py-spy``. Profiled runs are slower; don't record their numbers.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

_LINE_NO = re.compile(r":\d+\)$")


def py_spy() -> str | None:
    """The py-spy executable next to this Python, or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


class Profilers:
    """py-spy recorders attached to a set of PIDs; ``stop()`` writes and summarises them."""

    def __init__(self, out_dir: Path, *, tag: str, rate: int = 200) -> None:
        self.out_dir = out_dir
        self.tag = tag
        self.rate = rate
        self.procs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        self.warned = False

    def attach(self, pids: Mapping[str, int]) -> None:
        """Start a recorder for each process not recorded yet (called as PIDs appear)."""
        exe = py_spy()
        if exe is None:
            if not self.warned:
                print("bench: py-spy not found; no profiles", file=sys.stderr)
                self.warned = True
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for name, pid in pids.items():
            if name in self.procs:
                continue
            out = self.out_dir / f"{self.tag}-{name}.txt"
            argv = [exe, "record", "--pid", str(pid), "--rate", str(self.rate)]
            argv += ["--format", "raw", "--nonblocking", "-o", str(out)]
            log = (self.out_dir / f"{self.tag}-{name}.py-spy.log").open("wb")
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            log.close()
            self.procs[name] = (proc, out)

    def stop(self) -> list[Path]:
        """Stop the recorders; returns the summary files written."""
        summaries = []
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for name, (proc, out) in self.procs.items():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if out.is_file():
                summary = self.out_dir / f"{self.tag}-{name}.summary.txt"
                summary.write_text(summarize(out.read_text(errors="replace")))
                summaries.append(summary)
        self.procs.clear()
        return summaries


def _frame(raw: str) -> str:
    return _LINE_NO.sub(")", raw.strip())


def summarize(collapsed: str, *, top: int = 25) -> str:
    """Top functions by own samples and by inclusive samples, from py-spy's raw format
    (``frame;frame;...;frame count`` per line, outermost first); import-time stacks are
    counted apart."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = imports = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";") if f]
        if not frames:
            continue
        if any("_find_and_load" in f for f in frames):
            imports += count  # start-up: the profile begins when the process does
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if total == 0:
        return "no samples\n"
    lines = [f"{total} samples (non-idle), {imports} more in imports (left out)", ""]
    lines += ["own samples:"]
    lines += [f"  {n / total:6.1%}  {f}" for f, n in own.most_common(top)]
    lines += ["", "inclusive samples:"]
    lines += [f"  {n / total:6.1%}  {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(lines) + "\n"
