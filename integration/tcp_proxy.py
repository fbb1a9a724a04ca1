"""A TCP forwarder a test can cut: what a network partition between a client and its server looks like
to the client (open connections reset, new ones refused), without touching either process.

The bytes pass through untouched, so TLS between the two ends is unaffected; the forwarder listens on
127.0.0.1, a name a loopback server's certificate carries."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


class CuttableProxy:
    """Forwards connections on a free loopback port to ``target``. :meth:`cut` closes every open
    connection and refuses new ones until :meth:`mend`. ``accepted`` counts connections forwarded."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._down = False
        self._closed = False
        self.accepted = 0
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def cut(self) -> None:
        with self._lock:
            self._down = True
            for sock in self._open:
                _close(sock)
            self._open.clear()

    def mend(self) -> None:
        with self._lock:
            self._down = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._down:
                    _close(client)
                    continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)  # a watch stream may be idle for minutes
            with self._lock:
                self.accepted += 1
                self._open.update((client, server))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), name="proxy-pump", daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for sock in (src, dst):
            _close(sock)
            with self._lock:
                self._open.discard(sock)


def _close(sock: socket.socket) -> None:
    # shutdown first: it wakes a thread blocked in recv() on the same socket, which close() alone does not
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


@contextlib.contextmanager
def cuttable_proxy(target: tuple[str, int]) -> Iterator[CuttableProxy]:
    proxy = CuttableProxy(target)
    try:
        yield proxy
    finally:
        proxy.close()
