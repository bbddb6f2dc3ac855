"""The plugin's port-forward relay (`splitsched.kubectl.portforward.Relay`): every
connection to its loopback port gets a fresh far end from ``dial`` and bytes flow both
ways until either side closes. Here the far end is a local echo server instead of a
pod's ``pods/portforward`` stream."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from splitsched.kubectl import portforward


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data.upper())

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()
    server.close()


def test_each_connection_is_piped_to_its_own_far_end(echo: tuple[str, int]) -> None:
    dialled: list[socket.socket] = []

    def dial() -> socket.socket:
        far = socket.create_connection(echo, timeout=5)
        dialled.append(far)
        return far

    with portforward.Relay(dial) as relay:
        for word in (b"first", b"second"):
            with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as conn:
                conn.sendall(word * 10_000)
                conn.shutdown(socket.SHUT_WR)
                received = b""
                while data := conn.recv(65536):
                    received += data
                assert received == word.upper() * 10_000
    assert len(dialled) == 2


def test_a_failed_dial_drops_the_client_and_closing_stops_listening() -> None:
    def dial() -> socket.socket:
        raise RuntimeError("403 Forbidden: pods/portforward")

    relay = portforward.Relay(dial).start()
    with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as conn:
        assert conn.recv(1) == b""  # closed at once
    relay.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", relay.port), timeout=1).close()
