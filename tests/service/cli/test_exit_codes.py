"""The CLI's exit codes for a server that answers with an error: a refused identity
(PERMISSION_DENIED, UNAUTHENTICATED) is 5, not 3 ("unreachable"), and says so.

A real gRPC server in-process answers every Scheduler call with the status under test;
`splitsched.cli.main` talks to it over a real channel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from splitsched import apiclient, cli


class _Refuse(grpc.GenericRpcHandler):
    """Aborts every call with one status, as the security interceptor does."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        self.details = details

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[bytes, bytes] | None:
        def abort(request: bytes, context: grpc.ServicerContext) -> bytes:
            context.abort(self.code, self.details)
            raise AssertionError("abort returns only by raising")

        return grpc.unary_unary_rpc_method_handler(abort)


@pytest.fixture
def refusing_server() -> Iterator[Callable[[grpc.StatusCode, str], str]]:
    servers: list[Any] = []

    def start(code: grpc.StatusCode, details: str) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((_Refuse(code, details),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(0).wait()


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (grpc.StatusCode.PERMISSION_DENIED, apiclient.EXIT_DENIED),
        (grpc.StatusCode.UNAUTHENTICATED, apiclient.EXIT_DENIED),
        (grpc.StatusCode.UNAVAILABLE, apiclient.EXIT_UNAVAILABLE),
        (grpc.StatusCode.INTERNAL, apiclient.EXIT_UNAVAILABLE),
        (grpc.StatusCode.NOT_FOUND, apiclient.EXIT_NOT_FOUND),
    ],
)
def test_refused_identity_has_its_own_exit_code(
    refusing_server: Callable[[grpc.StatusCode, str], str],
    capsys: pytest.CaptureFixture[str],
    code: grpc.StatusCode,
    expected: int,
) -> None:
    details = "client 'splitsched-watcher' may not call /splitsched.v1.Scheduler/ListPods"
    server = refusing_server(code, details)
    exit_code = cli.main(["pods", "--server", server, "--timeout", "10"])
    err = capsys.readouterr().err
    assert exit_code == expected, err
    assert details in err
    if expected == apiclient.EXIT_DENIED:
        assert err.startswith("denied:") and code.name in err and server in err
    else:
        assert not err.startswith("denied:")
