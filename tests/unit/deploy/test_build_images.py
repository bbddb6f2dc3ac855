"""scripts/build-images.sh without building anything: the apt lines it makes the base image
from (read from the host's apt sources, so no mirror name is ever in the repository), its
options, its message when podman is missing, and the Dockerfile's side of its contract
(every stage that runs pip takes the PIP_CERT build argument).

The builds themselves need podman, mmdebstrap and root, and run in the real-node tier.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "scripts" / "build-images.sh"
DOCKERFILE = REPO_ROOT / "Dockerfile"

MIRROR = "http://mirror.invalid/debian"
SECURITY = "http://mirror.invalid/debian-security"
OTHER = "http://other.invalid/debian"

DEB822 = f"""\
# A comment, then a stanza with two suites we want and one we do not.
Types: deb deb-src
URIs: {MIRROR}/
Suites: bookworm bookworm-updates bookworm-backports
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.invalid/archive/debian-security/20250520T000000Z
URIs: {SECURITY}
Suites:
 bookworm-security
Components: main

Types: deb
Enabled: no
URIs: {OTHER}
Suites: bookworm

Types: deb-src
URIs: {OTHER}
Suites: bookworm
"""

ONE_LINE = f"""\
# deb {OTHER} bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] {OTHER} bookworm main   # trailing
deb-src {OTHER} bookworm-updates main
deb {MIRROR} bookworm main
deb {OTHER} trixie main
"""


def run_script(
    *args: str, apt_etc: Path | None = None, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if apt_etc is not None:
        env["SPLITSCHED_APT_ETC"] = str(apt_etc)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def apt_tree(tmp_path: Path, sources_list: str | None, sources: dict[str, str]) -> Path:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    if sources_list is not None:
        (etc / "sources.list").write_text(sources_list)
    for name, text in sources.items():
        (etc / "sources.list.d" / name).write_text(text)
    return etc


def test_deb822_sources_give_the_bookworm_suites(tmp_path: Path) -> None:
    etc = apt_tree(
        tmp_path,
        None,
        {"debian.sources": DEB822, "off.sources.disabled": f"Types: deb\nURIs: {OTHER}\n"},
    )
    result = run_script("--print-apt-sources", apt_etc=etc)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"deb {MIRROR} bookworm main",
        f"deb {MIRROR} bookworm-updates main",
        f"deb {SECURITY} bookworm-security main",
    ]


def test_one_line_sources_give_the_bookworm_suites(tmp_path: Path) -> None:
    etc = apt_tree(tmp_path, ONE_LINE, {"extra.list": f"deb {MIRROR} bookworm main\n"})
    result = run_script("--print-apt-sources", apt_etc=etc)
    assert result.returncode == 0, result.stderr
    # Options in brackets and comments are skipped; deb-src, other suites and the
    # duplicate line from extra.list are dropped.
    assert result.stdout.splitlines() == [
        f"deb {OTHER} bookworm main",
        f"deb {MIRROR} bookworm main",
    ]


def test_no_sources_print_nothing(tmp_path: Path) -> None:
    etc = apt_tree(tmp_path, f"deb {OTHER} trixie main\n", {})
    result = run_script("--print-apt-sources", apt_etc=etc)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_the_repository_names_no_mirror() -> None:
    """The mirror comes from the host at run time: the script holds no host name."""
    text = SCRIPT.read_text()
    assert not re.search(r"https?://[a-z]", text), "a URL in build-images.sh"
    assert "deb.debian.org" not in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "everything"], "--only takes base, pause or services"),
        (["--frobnicate"], "unknown argument: --frobnicate"),
    ],
)
def test_bad_arguments_are_refused(args: list[str], message: str) -> None:
    result = run_script(*args)
    assert result.returncode != 0
    assert message in result.stderr


def test_help_lists_every_option() -> None:
    result = run_script("--help")
    assert result.returncode == 0
    for option in ("--tag", "--only", "--rebuild-base", "--containerd-address", "--quiet"):
        assert option in result.stdout


def test_missing_podman_is_named(tmp_path: Path) -> None:
    """With a PATH that has the shell tools but no podman, the script says what to install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "awk", "sed", "date", "mktemp", "rm", "dirname", "cat", "tail"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} not on PATH")
        (bin_dir / tool).symlink_to(found)
    result = run_script("--only", "pause", path=str(bin_dir))
    assert result.returncode == 1
    assert "podman not found" in result.stderr
    assert "apt-get install podman" in result.stderr


def test_every_pip_stage_takes_the_ca_bundle_argument() -> None:
    """build-images.sh passes PIP_CERT (the mounted host CA bundle) as a build argument: a
    stage only sees it if it declares ``ARG PIP_CERT``, and none may give it a default or
    bake it into the image with ENV."""
    stages = re.split(r"(?m)^FROM ", DOCKERFILE.read_text())[1:]
    pip_stages = [s for s in stages if re.search(r"\bpip\s+(install|wheel)\b", s)]
    assert len(pip_stages) >= 4  # the wheel and one virtualenv per service
    for stage in pip_stages:
        name = stage.split("\n", 1)[0]
        assert re.search(r"(?m)^ARG PIP_CERT$", stage), f"{name}: no ARG PIP_CERT"
    assert not re.search(r"(?m)^ENV\b[^\n]*PIP_CERT", DOCKERFILE.read_text())
