"""kube-scheduler v1.36.3 as the oracle for KubeSchedulerConfiguration documents: it reads
each document of tests/support/schedconfig_cases.py, and each stored example
(tests/unit/core/data/schedconfig), and accepts or refuses it as the case says; the unit
tier checks splitsched's verdict on the same text. Where the two part, the case says why.

kube-scheduler is run as `kube-scheduler --master https://127.0.0.1:1 --config FILE
--write-config-to OUT`: it decodes, validates and builds every profile's framework, then
writes the configuration and exits, without reaching the (absent) API server. No control
plane is needed, only the cached binary (scripts/get-binaries.sh builds it).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from splitsched.testing import controlplane
from tests.support import schedconfig_cases as cases


@pytest.fixture(scope="module")
def kube_scheduler() -> Path:
    controlplane.ensure_binaries(("kube-scheduler",))
    return controlplane.binary_path("kube-scheduler")


def kube_reads(binary: Path, config: Path, tmp_path: Path) -> tuple[bool, str]:
    """(accepted, its error line) for one configuration file."""
    proc = subprocess.run(
        [
            str(binary),
            "--master=https://127.0.0.1:1",
            f"--config={config}",
            f"--write-config-to={tmp_path / 'written.yaml'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    failed = [line for line in proc.stderr.splitlines() if "command failed" in line]
    return proc.returncode == 0, (failed[-1] if failed else proc.stderr[-400:])


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.id)
def test_kube_scheduler_gives_the_verdict_the_case_records(
    kube_scheduler: Path, case: cases.Case, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(case.text)
    accepted, error = kube_reads(kube_scheduler, config, tmp_path)
    assert accepted == case.kube_accepts, error
    # Where splitsched parts from kube-scheduler, the case says why.
    assert ((case.refused is None) == accepted) or case.differs


@pytest.mark.parametrize("name", sorted(p.name for p in cases.DATA.glob("*.yaml")))
def test_kube_scheduler_reads_the_stored_examples_as_splitsched_does(
    kube_scheduler: Path, name: str, tmp_path: Path
) -> None:
    accepted, error = kube_reads(kube_scheduler, cases.DATA / name, tmp_path)
    missing = cases.EXAMPLES_KUBE_CANNOT_READ_HERE.get(name)
    if missing is not None:
        # Decoded and validated; only then does kube-scheduler open the kubeconfig.
        assert not accepted and f"stat {missing}: no such file" in error, error
        return
    assert accepted == (name not in cases.EXAMPLES_REFUSED), error
