"""KubeSchedulerConfiguration documents with the verdict splitsched gives each and the one
kube-scheduler v1.36.3 gives, so both can be checked: splitsched's in the unit tier
(tests/unit/core/schedconfig/test_cases.py), kube-scheduler's by running it
(tests/integration/test_kube_scheduler_config.py).

`refused` is the start of splitsched's error (None: accepted); `kube_accepts` is what
kube-scheduler does with the same text; `differs` says why the two part where they do
(splitsched refuses what it cannot honour, or what kube-scheduler silently ignores).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
DATA = Path(__file__).resolve().parents[1] / "unit" / "core" / "data" / "schedconfig"


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    refused: str | None
    kube_accepts: bool
    differs: str = ""


def _v1(body: str) -> str:
    return HEADER + body


CASES: tuple[Case, ...] = (
    Case("empty v1 document", HEADER, None, True),
    Case(
        "typos at the top level",
        _v1("percentageOfNodesToScor: 5\nleaderElekt: {}\n"),
        'strict decoding error: unknown field "leaderElekt", unknown field '
        '"percentageOfNodesToScor"',
        False,
    ),
    Case(
        "a field v1 removed",
        _v1("healthzBindAddress: 0.0.0.0:10251\n"),
        'strict decoding error: unknown field "healthzBindAddress"',
        False,
    ),
    Case(
        "a typo in a profile",
        _v1("profiles: [{schedulerName: a, pluginConfg: []}]\n"),
        'strict decoding error: unknown field "profiles[0].pluginConfg"',
        False,
    ),
    Case(
        "a typo in a plugin entry",
        _v1("profiles: [{plugins: {score: {enabled: [{name: ImageLocality, wieght: 2}]}}}]\n"),
        'strict decoding error: unknown field "profiles[0].plugins.score.enabled[0].wieght"',
        False,
    ),
    Case(
        "typos in args",
        _v1(
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {foo: 1, "
            "scoringStrategy: {type: MostAllocated, bar: 2}}}]}]\n"
        ),
        'strict decoding error: unknown field "profiles[0].pluginConfig[0].args.foo", unknown '
        'field "profiles[0].pluginConfig[0].args.scoringStrategy.bar"',
        False,
    ),
    Case(
        "an unknown extension point",
        _v1("profiles: [{plugins: {sideways: {}}}]\n"),
        'strict decoding error: unknown field "profiles[0].plugins.sideways"',
        False,
    ),
    Case(
        "a key given twice",
        _v1("parallelism: 4\nparallelism: 8\n"),
        'line 4: key "parallelism" already set in map',
        False,
    ),
    Case(
        "v1beta3",
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
        "apiVersion: 'kubescheduler.config.k8s.io/v1beta3' is not supported",
        False,
    ),
    Case(
        "an out-of-tree plugin",
        _v1("profiles: [{plugins: {filter: {enabled: [{name: Bogus}]}}}]\n"),
        'profiles[0].plugins.filter.enabled[0]: FilterPlugin "Bogus" does not exist',
        False,
    ),
    Case(
        "a plugin at a point it does not implement",
        _v1("profiles: [{plugins: {score: {enabled: [{name: NodeName}]}}}]\n"),
        'profiles[0].plugins.score.enabled[0]: plugin "NodeName" does not extend ScorePlugin',
        False,
    ),
    Case(
        "no queue sort plugin",
        _v1("profiles: [{plugins: {queueSort: {disabled: [{name: '*'}]}}}]\n"),
        "profiles[0].plugins.queueSort.disabled[0]: PrioritySort cannot be left out of queueSort",
        False,
    ),
    Case(
        "no bind plugin",
        _v1("profiles: [{plugins: {multiPoint: {disabled: [{name: DefaultBinder}]}}}]\n"),
        "profiles[0].plugins.multiPoint.disabled[0]: DefaultBinder cannot be left out of bind",
        False,
    ),
    Case(
        "scheduling gates off",
        _v1("profiles: [{plugins: {preEnqueue: {disabled: [{name: SchedulingGates}]}}}]\n"),
        "profiles[0].plugins.preEnqueue.disabled[0]: SchedulingGates cannot be left out",
        True,
        "kube-scheduler would try gated pods (and the API server refuse their Binding)",
    ),
    Case(
        "VolumeBinding without its PreBind",
        _v1("profiles: [{plugins: {preBind: {disabled: [{name: '*'}]}}}]\n"),
        "profiles[0].plugins.preBind.disabled[0]: VolumeBinding cannot be left out of preBind",
        True,
        "splitsched's binder always writes the volumes VolumeBinding reserved",
    ),
    Case(
        "everything off, the built-in ones back on",
        _v1(
            "profiles: [{plugins: {multiPoint: {disabled: [{name: '*'}], enabled: "
            "[{name: SchedulingGates}, {name: PrioritySort}, {name: DefaultBinder}, "
            "{name: NodeName}]}}}]\n"
        ),
        None,
        True,
    ),
    Case(
        "args for a plugin that takes none",
        _v1("profiles: [{pluginConfig: [{name: TaintToleration, args: {a: 1}}]}]\n"),
        "profiles[0].pluginConfig[0].args: TaintToleration takes no args",
        True,
        "kube-scheduler ignores them without a word",
    ),
    Case(
        "args for a plugin that does not exist",
        _v1("profiles: [{pluginConfig: [{name: NodeResourceFit, args: {a: 1}}]}]\n"),
        'profiles[0].pluginConfig[0].name: kube-scheduler v1.36 has no plugin "NodeResourceFit"',
        True,
        "kube-scheduler ignores args of a plugin it does not know (an out-of-tree one's)",
    ),
    Case(
        "args of another plugin's kind",
        _v1(
            "profiles: [{pluginConfig: [{name: NodeAffinity, args: {kind: "
            "InterPodAffinityArgs, apiVersion: kubescheduler.config.k8s.io/v1}}]}]\n"
        ),
        "profiles[0].pluginConfig[0].args: args for plugin NodeAffinity were not of type "
        "NodeAffinityArgs.kubescheduler.config.k8s.io",
        False,
    ),
    Case(
        "a scoring strategy without a type",
        _v1(
            "profiles: [{pluginConfig: [{name: NodeResourcesFit, args: {scoringStrategy: "
            "{resources: [{name: cpu}]}}}]}]\n"
        ),
        'profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: ""',
        False,
    ),
    Case(
        "VolumeBinding shape without StorageCapacityScoring",
        _v1(
            "profiles: [{pluginConfig: [{name: VolumeBinding, args: {shape: "
            "[{utilization: 0, score: 0}]}}]}]\n"
        ),
        "profiles[0].pluginConfig[0].args.shape: unexpected field `shape`",
        False,
    ),
    Case(
        "percentageOfNodesToScore out of range",
        _v1("percentageOfNodesToScore: 101\n"),
        "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]",
        False,
    ),
    Case(
        "backoff the wrong way round",
        _v1("podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n"),
        "podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to",
        False,
    ),
    Case(
        "two queue sort configurations",
        _v1(
            "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins: {queueSort: "
            "{enabled: [{name: PrioritySort}], disabled: [{name: '*'}]}}\n"
        ),
        "profiles[1].plugins.queueSort: Invalid value: must be the same for all profiles",
        False,
    ),
    Case(
        "two bind timeouts",
        _v1(
            "profiles:\n- schedulerName: a\n- schedulerName: b\n  pluginConfig: [{name: "
            "VolumeBinding, args: {bindTimeoutSeconds: 30}}]\n"
        ),
        "profiles[1]: VolumeBinding bindTimeoutSeconds 30 differs from profiles[0]'s 600",
        True,
        "splitsched has one deadline for decisions with volume bindings (the scheduler's)",
    ),
    Case(
        "a negative score weight",
        _v1("profiles: [{plugins: {score: {enabled: [{name: ImageLocality, weight: -1}]}}}]\n"),
        "profiles[0].plugins.score.enabled[0].weight: must not be negative",
        False,
    ),
    Case(
        "everything that is noted but accepted",
        _v1(
            "parallelism: 4\nleaderElection: {leaderElect: false}\nclientConnection: {qps: 5}\n"
            "enableProfiling: false\npercentageOfNodesToScore: 50\nextenders: []\n"
            "delayCacheUntilActive: true\npodInitialBackoffSeconds: 2\npodMaxBackoffSeconds: 20\n"
        ),
        None,
        True,
    ),
)

#: The stored example documents (tests/unit/core/data/schedconfig) kube-scheduler reads
#: as they are, but for the minimal one's kubeconfig, a file no machine here has.
EXAMPLES_KUBE_CANNOT_READ_HERE = {
    "docs-config-minimal.yaml": "/etc/srv/kubernetes/kube-scheduler/kubeconfig"
}
#: The examples both refuse: they name out-of-tree plugins (the docs' MyPlugin).
EXAMPLES_REFUSED = {"docs-config-custom-score-plugins.yaml", "docs-config-multipoint.yaml"}
