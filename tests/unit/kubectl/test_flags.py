"""`kubectl splitsched` reads kubectl's flags wherever they stand and resolves pod names
and listings in the namespace, as kubectl does (`splitsched.kubectl.flags`)."""

from __future__ import annotations

import pytest

from splitsched import cli
from splitsched.kubectl import flags


def test_kubectl_flags_come_out_wherever_they_stand() -> None:
    given = ["-n", "shop", "explain", "web-7", "--context", "kind", "--nodes", "-o", "json"]
    kubectl, rest = flags.split(given)
    assert kubectl == flags.KubectlFlags(namespace="shop", context="kind")
    assert rest == ["explain", "web-7", "--nodes", "-o", "json"]
    kubectl, rest = flags.split(["pods", "-A", "--kubeconfig=/k", "--server", "h:1", "--pending"])
    assert kubectl == flags.KubectlFlags(kubeconfig="/k", all_namespaces=True, server="h:1")
    assert rest == ["pods", "--pending"]


def test_no_abbreviation_is_taken_for_a_kubectl_flag() -> None:
    _, rest = flags.split(["watch", "--names", "x"])
    assert rest == ["watch", "--names", "x"]


@pytest.mark.parametrize(
    ("argv", "pod"),
    [
        (["explain", "web-7"], "shop/web-7"),
        (["explain", "other/web-7"], "other/web-7"),
        (["pods", "web-7"], "shop/web-7"),
    ],
)
def test_a_pod_name_resolves_in_the_namespace(argv: list[str], pod: str) -> None:
    args = cli.build_parser().parse_args(argv)
    flags.scope(args, namespace="shop", all_namespaces=False)
    assert args.pod == pod


@pytest.mark.parametrize("command", ["pods", "watch"])
def test_listings_show_the_namespace_unless_all_namespaces(command: str) -> None:
    args = cli.build_parser().parse_args([command])
    flags.scope(args, namespace="shop", all_namespaces=False)
    assert args.namespace == "shop"
    args = cli.build_parser().parse_args([command])
    flags.scope(args, namespace="shop", all_namespaces=True)
    assert args.namespace is None


def test_up_gets_kubectl_s_kubeconfig_and_context() -> None:
    kubectl, rest = flags.split(["up", "--binders", "3", "--context", "kind", "--kubeconfig", "/k"])
    assert flags.up_argv(kubectl, rest) == [
        "up", "--binders", "3", "--kubeconfig", "/k", "--context", "kind",
    ]  # fmt: skip
