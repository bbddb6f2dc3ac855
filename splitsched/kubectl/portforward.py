"""A port-forward to a pod, opened through the Kubernetes API as ``kubectl port-forward``
does, with no kubectl: a listener on a free loopback port whose every connection is piped
to a new stream of the pod's ``pods/portforward`` subresource (the kubernetes client's
websocket port-forward). gRPC then dials the loopback port like any server.

`Relay` knows nothing of Kubernetes: it pipes each connection to what ``dial`` returns
(`pod_dialer`: the pod's port; the tests: a local socket).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: Opens the far end of one connection: anything with recv, sendall, shutdown and close.
Dial = Callable[[], Any]


class Relay:
    """Listen on 127.0.0.1 (a free port) and pipe each connection to ``dial()``; daemon
    threads, so a CLI run never waits for them at exit."""

    def __init__(self, dial: Dial) -> None:
        self._dial = dial
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._closed = threading.Event()

    @property
    def port(self) -> int:
        port: int = self._listener.getsockname()[1]
        return port

    def start(self) -> Relay:
        threading.Thread(target=self._accept, name="portforward-accept", daemon=True).start()
        return self

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._connect, args=(conn,), daemon=True).start()

    def _connect(self, conn: socket.socket) -> None:
        try:
            far = self._dial()
        except Exception as exc:  # the API refused the port-forward: say so, drop the client
            log.error("port-forward failed: %s", exc)
            conn.close()
            return
        done = threading.Barrier(2, action=lambda: _close(conn, far))
        for src, dst in ((conn, far), (far, conn)):
            threading.Thread(target=_pipe, args=(src, dst, done), daemon=True).start()


def _pipe(src: Any, dst: Any, done: threading.Barrier) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then half-close ``dst``; the second of
    the two directions to finish closes both."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
    with contextlib.suppress(threading.BrokenBarrierError):
        done.wait()


def _close(*socks: Any) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.close()


def pod_dialer(api: Any, *, namespace: str, pod: str, port: int) -> Dial:
    """Opens one stream to ``port`` of ``namespace/pod`` through the API server
    (``create`` on ``pods/portforward``, as ``kubectl port-forward`` needs)."""
    from kubernetes import client
    from kubernetes.stream import portforward

    core = client.CoreV1Api(api)

    def dial() -> Any:
        forward = portforward(
            core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port)
        )
        return forward.socket(port)

    return dial
