"""A lean HTTP/1.1 client for the streaming requests: the fast path of the load generator.

aiohttp wakes the request's task for every read and decodes each HTTP chunk through several
layers; at tens of thousands of token messages a second that costs more than one core has.
Here the socket's ``data_received`` callback does everything in place: it takes the arrival
time, lets ``h11`` (an HTTP/1.1 state machine that does no I/O) undo the framing and hands the
read's payload to the same ``StreamTimer`` that the aiohttp path uses, so the timing rules are
shared; the request's task wakes only once, when the response ends. Connections are kept alive
and reused. A response whose framing is broken (a bad chunk size or Content-Length) fails its
request at once with reason ``bad_framing``; one whose stream the parser refuses (a message
past ``streams.MAX_MESSAGE_BYTES``) fails with the parser's reason. Of an error reply's body
only the first ``MAX_ERROR_BODY`` bytes are read; then the connection is closed.

Over plain TCP (http://) on Linux the arrival time is the kernel's: each read is a ``recvmsg``
with ``SO_TIMESTAMPNS``, which stamps the bytes when they reached the socket. A client busy
with other streams (256 of them share one event loop) then reads late but still records when
the token arrived, so its own load no longer shows up as inter-token jitter. Where the kernel
gives no stamp (https, other systems, the first packets after the stamps are switched on),
the time is taken when the bytes are read, as before.
"""

from __future__ import annotations

import asyncio
import socket
import ssl as ssl_module
import struct
import sys
import time
from urllib.parse import urlsplit

import h11

from tuner.loadgen.client import MAX_ERROR_BODY, Clock, RequestOutput, StreamTimer, request_headers

READ_SIZE = 256 * 1024
# SO_TIMESTAMPNS (Linux; the Python socket module does not name it): a struct timespec of
# CLOCK_REALTIME with each read.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
KERNEL_STAMPS = sys.platform.startswith("linux")
MAX_STAMP_AGE_S = 60.0  # an older stamp means the wall clock was stepped: read-time instead


class HTTPError(Exception):
    """The server answered in a way the client cannot read."""


class BadFraming(HTTPError):
    """The response's HTTP/1.1 framing is broken (a bad chunk size or Content-Length): the
    request fails at once with reason ``bad_framing``."""

    failure_reason = "bad_framing"


class _Response:
    """Reads one response through the connection's ``h11`` state machine as bytes arrive;
    resolves ``done`` when it has ended. Every body byte of one read reaches the stream
    timer in one piece, with that read's arrival time."""

    def __init__(self, http: h11.Connection, timer: StreamTimer, clock: Clock,
                 done: asyncio.Future) -> None:
        self.http, self.timer, self.clock, self.done = http, timer, clock, done
        self.status = 0
        self.reason = ""
        self.error_body = b""
        self.keep_alive = True
        self.received = False

    def feed(self, data: bytes, age: float = 0.0) -> None:
        """``data`` arrived ``age`` seconds ago (the kernel's stamp; 0: just now)."""
        if self.done.done():  # bytes after the end or after an error
            return
        self.received = True
        self.http.receive_data(data)
        self._events(self.clock() - age)

    def lost(self, exc: Exception | None) -> None:
        if self.done.done():
            return
        if exc is None:  # a clean close ends a close-delimited body, and only that
            self.http.receive_data(b"")
            self._events(self.clock(), closed=True)
            if self.done.done():
                return
        self.done.set_exception(exc or ConnectionResetError("server closed the connection"))

    def _events(self, t: float, closed: bool = False) -> None:
        payload: list[bytes] = []
        try:
            while True:
                event = self.http.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    break
                kind = type(event)
                if kind is h11.Data:
                    payload.append(event.data)
                elif kind is h11.Response:
                    self.status = event.status_code
                    self.reason = event.reason.decode("latin-1")
                elif kind is h11.EndOfMessage or kind is h11.ConnectionClosed:
                    self._body(t, payload)
                    self._end()
                    return
        except h11.RemoteProtocolError as e:
            self.keep_alive = False
            # After the server closed, h11's complaint is a body cut short, not its framing.
            self.done.set_exception(ConnectionResetError(f"server closed the connection: {e}")
                                    if closed else BadFraming(f"bad HTTP framing: {e}"))
            return
        self._body(t, payload)

    def _body(self, t: float, payload: list[bytes]) -> None:
        if not payload:
            return
        data = b"".join(payload)
        if self.status == 200:
            try:
                self.timer.feed(t, data)
            except Exception as e:  # the parser refused the stream: the request fails now
                self.keep_alive = False
                self.done.set_exception(e)
        else:
            self.error_body += data[:MAX_ERROR_BODY - len(self.error_body)]
            if len(self.error_body) >= MAX_ERROR_BODY:  # enough to tell why: stop reading
                self.keep_alive = False
                self.done.set_result(None)

    def _end(self) -> None:
        if self.done.done():
            return
        http = self.http
        # Reused only when both sides finished cleanly and nothing followed the response.
        self.keep_alive = (http.our_state is h11.DONE and http.their_state is h11.DONE
                           and not http.trailing_data[0])
        if self.status == 200:
            self.timer.finish(self.clock)
        self.done.set_result(None)


class _Connection(asyncio.Protocol):
    """A connection through an asyncio transport (https, or no kernel stamps)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.http = h11.Connection(h11.CLIENT)
        self.response: _Response | None = None
        self.closed = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self.response is not None:
            self.response.feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.response is not None:
            self.response.lost(exc)

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def close(self) -> None:
        self.transport.close()


class _StampedConnection:
    """A plain TCP connection read with ``recvmsg``, each read stamped by the kernel."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self.loop, self.sock = loop, sock
        self.http = h11.Connection(h11.CLIENT)
        self.response: _Response | None = None
        self.closed = False
        self.unsent = b""
        loop.add_reader(sock.fileno(), self._readable)

    @classmethod
    async def open(cls, host: str, port: int) -> _StampedConnection:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        error: OSError | None = None
        for family, kind, proto, _, addr in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                await loop.sock_connect(sock, addr)
                return cls(loop, sock)
            except OSError as e:
                sock.close()
                error = e
        raise error or OSError(f"cannot connect to {host}:{port}")

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(READ_SIZE, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._lost(e)
            return
        if not data:
            self._lost(None)
            return
        age = 0.0
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack_from("qq", raw)
                age = time.time() - (sec + nsec * 1e-9)
                if not 0.0 <= age <= MAX_STAMP_AGE_S:
                    age = 0.0
        if self.response is not None:
            self.response.feed(data, age)

    def write(self, data: bytes) -> None:
        """Send ``data`` now, the rest when the socket can take it (requests are small)."""
        if self.unsent:
            self.unsent += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as e:
            self._lost(e)
            return
        if sent < len(data):
            self.unsent = data[sent:]
            self.loop.add_writer(self.sock.fileno(), self._writable)

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self.unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._lost(e)
            return
        self.unsent = self.unsent[sent:]
        if not self.unsent:
            self.loop.remove_writer(self.sock.fileno())

    def _lost(self, exc: Exception | None) -> None:
        self.close()
        if self.response is not None:
            self.response.lost(exc)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.loop.remove_reader(self.sock.fileno())
        if self.unsent:
            self.loop.remove_writer(self.sock.fileno())
        self.sock.close()


class Client:
    """Keep-alive connections to one server, for streaming POSTs."""

    def __init__(self, base_url: str, timeout_s: float = 6 * 3600.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.ssl = ssl_module.create_default_context() if parts.scheme == "https" else None
        self.timeout_s = timeout_s
        self.idle: list[_Connection | _StampedConnection] = []
        self.stamped = KERNEL_STAMPS and self.ssl is None
        fields = {"Host": f"{self.host}:{self.port}", "Accept": "*/*", **request_headers()}
        self.headers = list(fields.items())

    async def close(self) -> None:
        for conn in self.idle:
            conn.close()
        self.idle.clear()

    async def _connect(self) -> tuple[_Connection | _StampedConnection, bool]:
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed:
                return conn, True
        if self.stamped:
            return await _StampedConnection.open(self.host, self.port), False
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Connection, self.host, self.port, ssl=self.ssl)
        return conn, False

    async def post_stream(self, path: str, body: bytes, timer: StreamTimer, clock: Clock,
                          ) -> tuple[int, str, bytes]:
        """POST ``body``; a 200 reply streams into ``timer``. Returns (status, reason, body of
        a non-200 reply). Raises OSError, TimeoutError or HTTPError when no answer came."""
        request = h11.Request(method="POST", target=self.prefix + path,
                              headers=[*self.headers, ("Content-Length", str(len(body)))])
        for attempt in (0, 1):
            conn, reused = await self._connect()
            done = asyncio.get_running_loop().create_future()
            response = conn.response = _Response(conn.http, timer, clock, done)
            http = conn.http
            conn.write(http.send(request) + http.send(h11.Data(data=body))
                       + http.send(h11.EndOfMessage()))
            try:
                await _within(done, self.timeout_s)
            except TimeoutError:
                conn.close()
                raise TimeoutError(f"no complete reply within {self.timeout_s:g} s") from None
            except (ConnectionError, OSError):
                # A kept-alive connection the server had closed: send once more on a new one.
                if reused and not response.received and attempt == 0:
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            finally:
                conn.response = None
            if response.keep_alive and not conn.closed:
                conn.http.start_next_cycle()
                self.idle.append(conn)
            else:
                conn.close()
            return response.status, response.reason, response.error_body
        raise AssertionError("unreachable")


async def send_fast(client: Client, path: str, body: bytes, parser, out: RequestOutput,
                    clock: Clock) -> RequestOutput:
    """As ``client.send`` but over ``Client``: a failed request is data, never an exception."""
    out.start_time = clock()
    try:
        status, reason, detail = await client.post_stream(path, body, StreamTimer(out, parser),
                                                          clock)
        if status != 200:
            out.reason = f"http_{status}"
            out.error = f"HTTP {status} {reason}: {detail[:300].decode(errors='replace')}"
    except asyncio.CancelledError:
        raise
    except Exception as e:  # any failure of one request is data, not the run's end
        out.fail(e)
    return out


async def _within(fut: asyncio.Future, seconds: float):
    """``await fut`` for at most ``seconds`` (TimeoutError after). ``asyncio.timeout`` where
    it exists (3.11+): Python 3.11's ``wait_for`` can swallow a cancellation that arrives
    as the future completes, and a swallowed Ctrl-C let a benchmark run on to its end."""
    timeout = getattr(asyncio, "timeout", None)
    if timeout is None:  # pragma: no cover - Python 3.10
        return await asyncio.wait_for(fut, seconds)
    async with timeout(seconds):
        return await fut
