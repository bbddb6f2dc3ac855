"""The krew plugin manifest (deploy/krew/splitsched.yaml) has every field krew requires,
names the executable the package installs, carries the package's version, and its sha256
is that of the archive scripts/krew-archive.py builds (reproducibly) from the shim."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
MANIFEST = REPO / "deploy" / "krew" / "splitsched.yaml"


def _manifest() -> dict[str, object]:
    doc = yaml.safe_load(MANIFEST.read_text())
    assert isinstance(doc, dict)
    return doc


def test_the_manifest_has_what_krew_requires() -> None:
    doc = _manifest()
    assert doc["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert doc["kind"] == "Plugin"
    spec = doc["spec"]
    assert isinstance(spec, dict)
    for field in ("version", "shortDescription", "description", "platforms"):
        assert spec.get(field), field
    assert len(spec["shortDescription"]) <= 50  # krew's guideline: one short line
    assert re.fullmatch(r"v\d+\.\d+\.\d+", spec["version"])
    for platform in spec["platforms"]:
        assert platform["selector"]["matchExpressions"] or platform["selector"]["matchLabels"]
        assert platform["uri"].startswith("https://")
        assert re.fullmatch(r"[0-9a-f]{64}", platform["sha256"])
        assert platform["bin"] == "kubectl-splitsched"
        assert {"from": "kubectl-splitsched", "to": "."} in platform["files"]


def test_it_names_the_package_s_executable_and_version() -> None:
    doc = _manifest()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["kubectl-splitsched"] == "splitsched.kubectl:main"
    assert doc["metadata"] == {"name": "splitsched"}  # kubectl-<name>
    assert doc["spec"]["version"] == f"v{project['version']}"  # type: ignore[index]
    assert "pip install" in doc["spec"]["caveats"]  # type: ignore[index]


def test_its_sha256_is_the_archive_s(tmp_path: Path) -> None:
    out = tmp_path / "kubectl-splitsched.tar.gz"
    printed = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "krew-archive.py"), str(out)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()[0]  # fmt: skip
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert printed == digest
    [platform] = _manifest()["spec"]["platforms"]  # type: ignore[index]
    assert platform["sha256"] == digest, "run scripts/krew-archive.py and update the manifest"


def test_the_shim_runs_the_package_s_plugin_or_says_how_to_install_it() -> None:
    shim = REPO / "deploy" / "krew" / "kubectl-splitsched"
    ran = subprocess.run(
        [str(shim), "--help"], capture_output=True, text=True, timeout=60, check=False,
        env={"SPLITSCHED_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert ran.returncode == 0 and ran.stdout.startswith("kubectl splitsched: ")
    missing = subprocess.run(
        [str(shim), "pods"], capture_output=True, text=True, timeout=60, check=False,
        env={"SPLITSCHED_PYTHON": "/bin/false", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert missing.returncode == 3
    assert "splitsched Python package is not installed for /bin/false" in missing.stderr
