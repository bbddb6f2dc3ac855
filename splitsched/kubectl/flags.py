"""The flags `kubectl splitsched` takes as kubectl does, and what they change in the CLI's
arguments. Pure: no file, socket or API call.

kubectl hands a plugin every argument after its name and none of its own flags, so the
plugin reads ``--kubeconfig``, ``--context``, ``-n/--namespace`` and
``-A/--all-namespaces`` itself, wherever they stand, and passes the rest to the
`splitsched` CLI's parser. ``--server`` is read here too: given (or
``SPLITSCHED_SERVER``), the plugin dials it instead of port-forwarding to the chart's
scheduler; ``--splitsched-namespace`` says where the chart is when listing pods in every
namespace is not allowed.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

#: The CLI's subcommands that name one pod (``NAME`` resolves in the namespace).
ONE_POD = ("explain", "pods")
#: The CLI's subcommands that list pods of one namespace, or all with -A.
PER_NAMESPACE = ("pods", "watch")
#: Subcommands that never talk to the scheduler API: passed to the CLI as they are.
LOCAL = ("up",)

HELP = """\
kubectl splitsched: the splitsched CLI as a kubectl plugin.

  kubectl splitsched explain POD [-n NAMESPACE]
  kubectl splitsched pods [POD] [--pending] [-n NAMESPACE | -A]
  kubectl splitsched nodes | watch [-n NAMESPACE | -A] | simulate -f pod.yaml

kubectl's flags, anywhere on the line:
  --kubeconfig PATH        default: $KUBECONFIG, else ~/.kube/config
  --context NAME           default: the kubeconfig's current context
  -n, --namespace NS       default: the context's namespace, else "default"
  -A, --all-namespaces     pods and watch: every namespace

Where the scheduler is: --server HOST:PORT (or SPLITSCHED_SERVER, with --ca/--cert/--key
or SPLITSCHED_CA/_CERT/_KEY), e.g. what `splitsched up` printed; without it, the scheduler
pod the Helm chart installed, through a port-forward the plugin opens itself, with the
chart's ops certificate (Secret <release>-ops-tls) unless --ca/--cert/--key are given.
  --splitsched-namespace NS  where the chart is (default: found among all namespaces)
"""


@dataclass(frozen=True)
class KubectlFlags:
    """kubectl's flags and the plugin's own, as given (None: not given)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    server: str | None = None
    splitsched_namespace: str | None = None


def split(argv: Sequence[str]) -> tuple[KubectlFlags, list[str]]:
    """kubectl's flags out of ``argv``, and the rest in order, for the CLI's parser."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument("--kubeconfig")
    p.add_argument("--context")
    p.add_argument("-n", "--namespace")
    p.add_argument("-A", "--all-namespaces", action="store_true")
    p.add_argument("--server")
    p.add_argument("--splitsched-namespace")
    known, rest = p.parse_known_args(list(argv))
    return KubectlFlags(**vars(known)), rest


def scope(args: argparse.Namespace, *, namespace: str, all_namespaces: bool) -> None:
    """Resolve pod names and listings in ``namespace``, as kubectl does: ``explain web``
    is ``NAMESPACE/web``; ``pods`` lists that namespace only, unless ``all_namespaces``."""
    if args.command in ONE_POD and getattr(args, "pod", None):
        if "/" not in args.pod:
            args.pod = f"{namespace}/{args.pod}"
    elif args.command in PER_NAMESPACE:
        args.namespace = None if all_namespaces else namespace


def up_argv(flags: KubectlFlags, rest: Sequence[str]) -> list[str]:
    """``kubectl splitsched up``: the CLI's ``up`` with kubectl's kubeconfig and context."""
    argv = list(rest)
    if flags.kubeconfig:
        argv += ["--kubeconfig", flags.kubeconfig]
    if flags.context:
        argv += ["--context", flags.context]
    return argv
