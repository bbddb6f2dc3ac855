"""The document as a whole: its version, strict fields, the values kube-scheduler checks, the
fields noted as ignored (each once) and the ones applied (the queue's backoff)."""

from __future__ import annotations

import pytest

from splitsched.core import profiles
from splitsched.core.schedconfig import document

V1 = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def refusal(text: str) -> str:
    with pytest.raises(profiles.ProfileError) as info:
        profiles.load_yaml(text)
    return str(info.value)


def test_the_short_form_without_apiversion_and_kind_is_read_as_v1() -> None:
    config = profiles.load_yaml("profiles: [{schedulerName: a}]\n")
    assert list(config.profiles) == ["a"] and config.notes == ()
    assert list(profiles.load_yaml("").profiles) == [profiles.DEFAULT_SCHEDULER_NAME]


@pytest.mark.parametrize(
    ("head", "message"),
    [
        ("apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n",
         "(v1beta2 was removed in kube-scheduler v1.28)"),
        ("apiVersion: v1\nkind: KubeSchedulerConfiguration\n",
         "apiVersion: 'v1' is not supported: use kubescheduler.config.k8s.io/v1"),
        ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Policy\n",
         "kind: expected KubeSchedulerConfiguration, got 'Policy'"),
        ("kind: KubeSchedulerConfiguration\n", "apiVersion: None is not supported"),
    ],
)  # fmt: skip
def test_other_versions_and_kinds_are_refused_saying_which(head: str, message: str) -> None:
    assert message in refusal(head)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("parallelism: '16'\n", "parallelism: expected an integer, got '16'"),
        ("parallelism: true\n", "parallelism: expected an integer, got True"),
        ("profiles: {a: 1}\n", "profiles: expected a list"),
        ("profiles: [{schedulerName: 7}]\n", "profiles[0].schedulerName: expected a string"),
        ("profiles: [{plugins: {filter: {enabled: {name: NodeName}}}}]\n",
         "profiles[0].plugins.filter.enabled: expected a list"),
        ("profiles: [{plugins: {filter: {enabled: [{weight: 1}]}}}]\n",
         "profiles[0].plugins.filter.enabled[0].name: Required value"),
        ("leaderElection: {leaseDuration: 15}\n",
         "leaderElection.leaseDuration: expected a duration such as 15s or 1m30s, got 15"),
        ("profiles: [{pluginConfig: [{args: {}}]}]\n",
         "profiles[0].pluginConfig[0].name: Required value"),
        ("profiles: [{pluginConfig: [{name: NodeAffinity, args: [1]}]}]\n",
         "profiles[0].pluginConfig[0].args: expected a mapping"),
        ("profiles: [{schedulerName: ''}]\n", "profiles[0].schedulerName: Required value"),
        ("profiles: [{}, {}]\n", "profiles[1].schedulerName: duplicate 'splitsched'"),
        ("parallelism: 0\n", "parallelism: Invalid value: 0: should be an integer value"),
        ("podInitialBackoffSeconds: 0\n", "podInitialBackoffSeconds: Invalid value: 0"),
        ("profiles: [{percentageOfNodesToScore: -1}]\n",
         "profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]"),
        ("profiles: [{pluginConfig: [{name: NodeAffinity}, {name: NodeAffinity}]}]\n",
         "profiles[0].pluginConfig[1]: Duplicate value: 'NodeAffinity'"),
        ("profiles: [\n", "scheduler config is not valid YAML"),
        ("profiles: [[1]]\n", "profiles[0]: expected a mapping, got [1]"),
    ],
)  # fmt: skip
def test_a_wrong_value_is_refused_naming_its_field(body: str, message: str) -> None:
    assert message in refusal(V1 + body)


def test_a_top_level_list_is_refused() -> None:
    assert refusal("[1]") == "scheduler config: expected a mapping at the top level"


def test_ignored_fields_are_noted_once_each_and_naming_the_field() -> None:
    config = profiles.load_yaml(
        V1 + "parallelism: 8\nleaderElection: {leaderElect: true}\nclientConnection: {}\n"
        "enableProfiling: true\nenableContentionProfiling: true\npercentageOfNodesToScore: 30\n"
        "extenders: [{urlPrefix: 'http://x', filterVerb: filter}]\ndelayCacheUntilActive: true\n"
        "profiles:\n- schedulerName: a\n  percentageOfNodesToScore: 50\n- schedulerName: b\n"
    )
    fields = [note.split(":", 1)[0] for note in config.notes]
    assert fields == [
        "parallelism", "leaderElection", "clientConnection", "enableProfiling",
        "enableContentionProfiling", "percentageOfNodesToScore", "extenders",
        "delayCacheUntilActive", "profiles[0].percentageOfNodesToScore",
    ]  # fmt: skip
    assert all(": ignored: " in note for note in config.notes)
    leader = next(n for n in config.notes if n.startswith("leaderElection"))
    assert "--leader-elect" in leader


def test_a_null_is_as_good_as_absent() -> None:
    config = profiles.load_yaml(V1 + "leaderElection: null\nprofiles: [{plugins: {score: null}}]\n")
    assert config.notes == ()


def test_the_queue_backoff_is_applied_not_noted() -> None:
    config = profiles.load_yaml(V1 + "podInitialBackoffSeconds: 2\npodMaxBackoffSeconds: 30\n")
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (2, 30)
    assert config.notes == ()
    default = profiles.load(None)
    assert (default.pod_initial_backoff_seconds, default.pod_max_backoff_seconds) == (1, 10)


def test_a_duplicate_key_is_refused_with_its_line() -> None:
    text = V1 + "profiles:\n- schedulerName: a\n  schedulerName: b\n"
    with pytest.raises(profiles.ProfileError, match=r'^line 5: key "schedulerName" already set'):
        document.read_yaml(text)


def test_durations_read_as_go_writes_them() -> None:
    for good in ("15s", "1m0s", "10m0s", "1h2m3.5s", "300ms", "0"):
        profiles.load_yaml(V1 + f"leaderElection: {{retryPeriod: {good!r}}}\n")
    for bad in ("15", "s", "1 m", "1d"):
        assert "retryPeriod" in refusal(V1 + f"leaderElection: {{retryPeriod: {bad!r}}}\n")
