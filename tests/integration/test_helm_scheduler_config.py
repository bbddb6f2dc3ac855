"""The chart's scheduler.config: an unmodified KubeSchedulerConfiguration v1, given as a
mapping in the values or as a file's text (--set-file), reaches the scheduler's ConfigMap
as it was written (the text byte for byte), the scheduler's core loads it, and the
watcher and the binders are told exactly its profiles' schedulerNames. The older
scheduler.profiles shorthand still replaces the profiles. Needs only the helm binary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from splitsched.core import profiles
from splitsched.testing import controlplane
from tests.support import schedconfig_cases as cases
from tests.support.helm import CHART, Manifest, container, kube_version, one, render, run_helm


@pytest.fixture(scope="module")
def helm() -> Path:
    controlplane.ensure_binaries(("helm",))
    return controlplane.binary_path("helm")


def config_text(docs: list[Manifest]) -> str:
    text = one(docs, "ConfigMap", "scheduler")["data"]["profiles.yaml"]
    assert isinstance(text, str)
    return text


def names_told(docs: list[Manifest], component: str) -> list[str]:
    [arg] = [a for a in container(docs, component)["args"] if a.startswith("--scheduler-names=")]
    return str(arg).split("=", 1)[1].split(",")


def check_served(docs: list[Manifest], names: list[str]) -> None:
    assert list(profiles.load_yaml(config_text(docs)).profiles) == names
    assert names_told(docs, "watcher") == names
    assert names_told(docs, "binder") == names


def test_the_default_is_a_v1_document_with_one_splitsched_profile(helm: Path) -> None:
    docs = render(helm)
    assert yaml.safe_load(config_text(docs)) == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "splitsched"}],
    }
    check_served(docs, ["splitsched"])


def test_a_configuration_in_the_values_reaches_the_scheduler_as_written(
    helm: Path, tmp_path: Path
) -> None:
    document = yaml.safe_load((cases.DATA / "docs-node-affinity-per-profile.yaml").read_text())
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"scheduler": {"config": document}}))
    docs = render(helm, values=[values])
    assert yaml.safe_load(config_text(docs)) == document
    check_served(docs, ["default-scheduler", "foo-scheduler"])


def test_a_configuration_file_given_with_set_file_is_kept_byte_for_byte(helm: Path) -> None:
    source = cases.DATA / "docs-config-multiple-profiles.yaml"
    result = run_helm(
        helm, "template", "x", str(CHART), "--kube-version", kube_version(),
        "--set-file", f"scheduler.config={source}",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    docs: list[Any] = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert config_text(docs) == source.read_text()
    check_served(docs, ["default-scheduler", "no-scoring-scheduler"])


def test_the_profiles_shorthand_replaces_the_configurations_profiles(
    helm: Path, tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "scheduler": {
                    "config": {"percentageOfNodesToScore": 50},
                    "profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}],
                }
            }
        )
    )
    docs = render(helm, values=[values])
    written = yaml.safe_load(config_text(docs))
    assert written["percentageOfNodesToScore"] == 50
    assert written["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    check_served(docs, ["a", "b"])
