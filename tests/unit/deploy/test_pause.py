"""deploy/pause/pause.c, the pod sandbox's PID 1, compiled the way scripts/build-images.sh
compiles it (gcc -static -Os) and run on the host: it sleeps, exits 0 on SIGTERM and
SIGINT, and, as PID 1 of a PID namespace, reaps the orphans it inherits.

Skipped without gcc and a static libc; the namespace test also needs root and unshare.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
SOURCE = REPO_ROOT / "deploy" / "pause" / "pause.c"
CONTAINERFILE = REPO_ROOT / "deploy" / "pause" / "Containerfile"


@pytest.fixture(scope="module")
def pause_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed")
    out = tmp_path_factory.mktemp("pause") / "pause"
    result = subprocess.run(
        [gcc, "-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0 and "cannot find -lc" in result.stderr:
        pytest.skip("no static libc (libc6-dev)")
    assert result.returncode == 0, result.stderr
    return out


def wait_exit(process: subprocess.Popen[bytes], timeout: float = 5.0) -> int:
    try:
        return process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_version(pause_binary: Path) -> None:
    result = subprocess.run(
        [str(pause_binary), "-v"], capture_output=True, text=True, timeout=10, check=False
    )
    assert result.returncode == 0
    assert result.stderr.strip() == "splitsched-pause 1.0"


def test_other_arguments_are_refused(pause_binary: Path) -> None:
    result = subprocess.run(
        [str(pause_binary), "--sleep"], capture_output=True, text=True, timeout=10, check=False
    )
    assert result.returncode == 2
    assert "usage" in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sleeps_until_asked_to_stop_then_exits_0(pause_binary: Path, sig: signal.Signals) -> None:
    process = subprocess.Popen([str(pause_binary)], stderr=subprocess.PIPE)
    time.sleep(0.3)
    assert process.poll() is None, "pause exited by itself"
    # SIGCHLD and other harmless signals do not end it.
    process.send_signal(signal.SIGCHLD)
    process.send_signal(signal.SIGWINCH)
    time.sleep(0.1)
    assert process.poll() is None
    process.send_signal(sig)
    assert wait_exit(process) == 0
    assert process.stderr is not None
    assert f"{sig.name}, exiting" in process.stderr.read().decode()


def children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            found.append((int(entry.name), fields[0]))
    return found


def test_reaps_the_orphans_of_its_pid_namespace(pause_binary: Path) -> None:
    unshare, nsenter = shutil.which("unshare"), shutil.which("nsenter")
    if os.geteuid() != 0 or unshare is None or nsenter is None:
        pytest.skip("needs root, unshare and nsenter")
    outer = subprocess.Popen(
        [unshare, "--pid", "--fork", "--kill-child", str(pause_binary)],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 5
        inner: list[tuple[int, str]] = []
        while not inner and time.monotonic() < deadline:
            time.sleep(0.05)
            inner = children_of(outer.pid)
        assert inner, "unshare started no pause"
        pause_pid = inner[0][0]
        status = Path(f"/proc/{pause_pid}/status").read_text().splitlines()
        [nspid] = [ln.split()[1:] for ln in status if ln.startswith("NSpid:")]
        assert nspid[-1] == "1", f"pause is not PID 1 of its namespace: {nspid}"
        # A shell in the namespace starts two short sleeps and exits at once: they are
        # orphaned, adopted by the namespace's PID 1, and must not stay zombies.
        subprocess.run(
            [nsenter, "-t", str(pause_pid), "-p", "--", "sh", "-c", "sleep 1 & sleep 1.5 &"],
            check=True,
            timeout=10,
        )
        time.sleep(0.1)
        assert len(children_of(pause_pid)) == 2, "the orphans were not adopted by pause"
        deadline = time.monotonic() + 5
        while children_of(pause_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert children_of(pause_pid) == [], "zombies left under pause"
        os.kill(pause_pid, signal.SIGTERM)
        assert wait_exit(outer) == 0
    finally:
        if outer.poll() is None:
            outer.kill()
            outer.wait()


def test_the_image_is_the_binary_alone() -> None:
    lines = [
        ln.split()
        for ln in CONTAINERFILE.read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines[0] == ["FROM", "scratch"]
    assert ["COPY", "pause", "/pause"] in lines
    assert ["ENTRYPOINT", '["/pause"]'] in lines
    user = next(ln[1] for ln in lines if ln[0] == "USER")
    assert not user.startswith(("0", "root"))
