"""The fields of kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration, as kube-scheduler
v1.36 decodes them (k8s.io/kube-scheduler/config/v1 types.go, k8s.io/component-base
config/v1alpha1), and what splitsched does with the ones that do not apply to it.

A field that has no meaning here is accepted and noted when set (`Struct.notes`: the
scheduler logs the note once at start, `splitsched simulate` prints it), so a document
kube-scheduler reads loads unchanged; a field kube-scheduler does not know is refused,
as kube-scheduler refuses it. pluginConfig args are `Raw` here and checked by
`schedconfig.pluginargs`, which knows each plugin's args type.
"""

from __future__ import annotations

from splitsched.core.schedconfig import kubeplugins as kp
from splitsched.core.schedconfig.schema import (
    BOOLEAN,
    DURATION,
    INTEGER,
    NUMBER,
    STRING,
    ListOf,
    Raw,
    Struct,
)

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

_ALL_NODES = "ignored: splitsched scores every feasible node, as kube-scheduler does with 100"

PLUGIN = Struct("Plugin", {"name": STRING, "weight": INTEGER})
PLUGIN_SET = Struct("PluginSet", {"enabled": ListOf(PLUGIN), "disabled": ListOf(PLUGIN)})
PLUGINS = Struct("Plugins", {point: PLUGIN_SET for point in (*kp.POINTS, kp.MULTI_POINT)})
PLUGIN_CONFIG = Struct("PluginConfig", {"name": STRING, "args": Raw()})

PROFILE = Struct(
    "KubeSchedulerProfile",
    {
        "schedulerName": STRING,
        "percentageOfNodesToScore": INTEGER,
        "plugins": PLUGINS,
        "pluginConfig": ListOf(PLUGIN_CONFIG),
    },
    notes={"percentageOfNodesToScore": _ALL_NODES},
)

LEADER_ELECTION = Struct(
    "LeaderElectionConfiguration",
    {
        "leaderElect": BOOLEAN,
        "leaseDuration": DURATION,
        "renewDeadline": DURATION,
        "retryPeriod": DURATION,
        "resourceLock": STRING,
        "resourceName": STRING,
        "resourceNamespace": STRING,
    },
)
CLIENT_CONNECTION = Struct(
    "ClientConnectionConfiguration",
    {
        "kubeconfig": STRING,
        "acceptContentTypes": STRING,
        "contentType": STRING,
        "qps": NUMBER,
        "burst": INTEGER,
    },
)
_EXTENDER_TLS = Struct(
    "ExtenderTLSConfig",
    {
        "insecure": BOOLEAN,
        "serverName": STRING,
        "certFile": STRING,
        "keyFile": STRING,
        "caFile": STRING,
        "certData": STRING,
        "keyData": STRING,
        "caData": STRING,
    },
)
EXTENDER = Struct(
    "Extender",
    {
        "urlPrefix": STRING,
        "filterVerb": STRING,
        "preemptVerb": STRING,
        "prioritizeVerb": STRING,
        "weight": INTEGER,
        "bindVerb": STRING,
        "enableHTTPS": BOOLEAN,
        "tlsConfig": _EXTENDER_TLS,
        "httpTimeout": DURATION,
        "nodeCacheCapable": BOOLEAN,
        "managedResources": ListOf(
            Struct("ExtenderManagedResource", {"name": STRING, "ignoredByScheduler": BOOLEAN})
        ),
        "ignorable": BOOLEAN,
    },
)

_NO_PPROF = "ignored: splitsched serves no pprof endpoints (profile it with py-spy)"

CONFIGURATION = Struct(
    KIND,
    {
        "apiVersion": STRING,
        "kind": STRING,
        "parallelism": INTEGER,
        "leaderElection": LEADER_ELECTION,
        "clientConnection": CLIENT_CONNECTION,
        "enableProfiling": BOOLEAN,
        "enableContentionProfiling": BOOLEAN,
        "percentageOfNodesToScore": INTEGER,
        "podInitialBackoffSeconds": INTEGER,
        "podMaxBackoffSeconds": INTEGER,
        "profiles": ListOf(PROFILE),
        "extenders": ListOf(EXTENDER),
        "delayCacheUntilActive": BOOLEAN,
    },
    notes={
        "parallelism": "ignored: splitsched judges all nodes at once, with no worker pool",
        "leaderElection": (
            "ignored: the scheduler's Lease comes from its --leader-elect and --lease-* "
            "flags (the chart's scheduler.leaderElection), never from kube-scheduler's"
        ),
        "clientConnection": (
            "ignored: the scheduler holds no Kubernetes credentials (the watcher and the "
            "binders have their own --kubeconfig)"
        ),
        "enableProfiling": _NO_PPROF,
        "enableContentionProfiling": _NO_PPROF,
        "percentageOfNodesToScore": _ALL_NODES,
        "extenders": (
            "ignored: splitsched calls no scheduler extenders (their filters, scores and "
            "binding do not apply)"
        ),
        "delayCacheUntilActive": (
            "ignored: a standby scheduler always keeps a warm view of the cluster"
        ),
    },
)
