"""Hostile HTTP servers on loopback: each answers every request (any path, any method) the
same wrong way, so that tests can show a client fails cleanly, in bounded time and memory.

Modes (``MODES``):

* ``close-mid-stream``: a chunked event stream of two token messages, then the connection
  is closed with the body unfinished.
* ``http-500``: an HTTP 500 with a short JSON error.
* ``garbage``: HTTP 200 ``text/event-stream`` whose body is HTML and random bytes, no SSE.
* ``silent``: reads the request and never answers (the connection stays open).
* ``huge-body``: HTTP 200 ``text/event-stream`` and ``body_bytes`` of one endless line,
  sent as fast as the client reads it (never held in the server's memory).

    with HostileServer("silent") as server:
        server.url  # http://127.0.0.1:PORT

A thread per connection serves it over a real socket; leaving the block closes them all.
"""

from __future__ import annotations

import random
import socket
import threading

MODES = ("close-mid-stream", "http-500", "garbage", "silent", "huge-body")
TOKEN = b'data: {"id":"x","choices":[{"index":0,"text":" tok"}]}\n\n'
MAX_HEAD = 1 << 16  # request head bytes read before giving up on a client
_SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


class HostileServer:
    """One hostile ``mode`` on a free loopback port (a context manager)."""

    def __init__(self, mode: str, body_bytes: int = 100 << 20) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
        self.mode, self.body_bytes = mode, body_bytes
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.listener.close()
        with self._lock:
            for conn in self.conns:
                _close(conn)
        self._thread.join(5)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed by __exit__
                return
            with self._lock:
                self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while not self.stop.is_set() and _read_request(conn):
                with self._lock:
                    self.requests += 1
                if not self._answer(conn):
                    return
        except OSError:  # the client went away: that is its right
            pass
        finally:
            _close(conn)

    def _answer(self, conn: socket.socket) -> bool:
        """Answer one request; True when the connection may carry another."""
        if self.mode == "silent":
            self.stop.wait()
            return False
        if self.mode == "http-500":
            body = b'{"error":{"message":"scripted failure","code":500}}'
            conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: "
                         b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            return True
        if self.mode == "close-mid-stream":
            chunk = TOKEN * 2
            conn.sendall(_SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
                         + b"%x\r\n%s\r\n" % (len(chunk), chunk))
            return False
        conn.sendall(_SSE_HEAD + b"Connection: close\r\n\r\n")
        if self.mode == "garbage":
            conn.sendall(b"<html><body>Bad gateway</body></html>\n"
                         + random.Random(0).randbytes(4096))
            return False
        block, sent = b"data: " + b"x" * ((1 << 20) - 6), 0  # huge-body: one endless line
        while sent < self.body_bytes and not self.stop.is_set():
            conn.sendall(block)
            sent += len(block)
        return False


def _read_request(conn: socket.socket) -> bool:
    """Read one request (head and Content-Length body); False when the client closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more or len(data) > MAX_HEAD:
            return False
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        more = conn.recv(65536)
        if not more:
            return False
        body += more
    return True


def _close(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()
