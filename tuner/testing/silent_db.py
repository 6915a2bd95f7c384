"""A database that accepts connections and never answers, on loopback, for tests.

``SilentDatabase()`` listens on 127.0.0.1 and, until ``silence()``, forwards each
connection to a real server (``upstream``); from then on the connections it forwarded
are cut and every new one is accepted and left without a byte of answer, as a database
whose host hangs, or a proxy whose server is gone, looks from the client. Without an
upstream it is silent from the start.

    with SilentDatabase(("127.0.0.1", 5432)) as db:
        url = db.url_for(real_url)   # the same database, reached through the listener
        db.silence()
"""

from __future__ import annotations

import socket
import threading

from sqlalchemy.engine import make_url

CHUNK = 65536


class SilentDatabase:
    """A TCP listener on 127.0.0.1 (``port``): forwarding, then silent."""

    def __init__(self, upstream: tuple[str, int] | None = None) -> None:
        self.upstream = upstream
        self._silent = threading.Event()
        if upstream is None:
            self._silent.set()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []   # every socket, closed at the end
        self._forwarded: list[socket.socket] = []  # cut by silence()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def url_for(self, url: str) -> str:
        """``url`` with its host and port replaced by this listener's."""
        return make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(
            hide_password=False)

    def silence(self) -> None:
        """Cut the forwarded connections; answer nothing from now on."""
        self._silent.set()
        with self._lock:
            for s in self._forwarded:
                _shut(s)
            self._forwarded.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self._sockets.append(client)
            if not self._silent.is_set():
                self._forward(client)

    def _forward(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            _shut(client)
            return
        server.settimeout(None)
        with self._lock:
            self._sockets.append(server)
            self._forwarded += [client, server]
        for a, b in ((client, server), (server, client)):
            threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def __enter__(self) -> "SilentDatabase":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                _shut(s)
                s.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    _shut(dst)


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
