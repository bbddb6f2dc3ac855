"""`kubectl splitsched ...`: the splitsched CLI as a kubectl plugin (the executable
``kubectl-splitsched``, installed with the package).

It takes kubectl's ``--kubeconfig``, ``--context``, ``-n`` and ``-A`` (`flags`), resolves
pod names in the context's namespace as kubectl does, and reaches the scheduler given by
``--server``/``SPLITSCHED_SERVER`` (e.g. `splitsched up`'s), else the Helm chart's
scheduler through a port-forward it opens itself with the chart's ops certificate
(`reach`). Exit codes are the CLI's (`splitsched.apiclient`); 3 also when the scheduler
cannot be found or reached through the Kubernetes API.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from splitsched import apiclient, cli
from splitsched.kubectl import flags, reach


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _run(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # here, where a closed pipe is still caught
        return code
    except BrokenPipeError:
        return cli.closed_pipe()


def _run(given: list[str]) -> int:
    kubectl, rest = flags.split(given)
    if not rest or rest[0] in ("-h", "--help"):
        print(flags.HELP)
        return apiclient.EXIT_OK if rest else apiclient.EXIT_BAD_INPUT
    if rest[0] in flags.LOCAL:
        return cli.main(flags.up_argv(kubectl, rest))
    args = cli.build_parser().parse_args(rest)
    if args.command == "simulate" and args.cluster:
        return cli.main(rest)  # offline: no server, no namespace
    try:
        namespace = reach.context_namespace(kubectl)
        flags.scope(args, namespace=namespace, all_namespaces=kubectl.all_namespaces)
        server = kubectl.server or os.environ.get("SPLITSCHED_SERVER")
        if server:
            args.server = server
            return apiclient.run(args)
        with reach.scheduler_endpoint(kubectl, args):
            return apiclient.run(args)
    except reach.ReachError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return apiclient.EXIT_UNAVAILABLE
