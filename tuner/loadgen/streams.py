"""Cheap parsers for the two streaming wire formats: they count the messages that carry a
token and pick out the usage report and any error, without decoding every chunk.

* ``SSEParser``: OpenAI server-sent events (``data: {json}`` messages separated by a blank
  line, ``data: [DONE]`` at the end). A message counts as content when it has a non-empty
  ``choices`` list, exactly as vLLM's benchmark decides. vLLM writes compact JSON, so counting
  substrings over a whole network read settles the usual case (all token chunks, no usage
  object); anything else (usage, errors, other spacing) goes message by message through
  ``json.loads``.
* ``GenerateParser``: vLLM's plain ``api_server`` ``/generate`` stream, JSON objects
  ``{"text": [...]}`` separated by NUL (older releases) or newline (newer ones). Each object is
  one step's output and counts as one content chunk.

``feed(data)`` returns how many content messages completed inside ``data``; ``flush()`` does the
same for what is left when the stream ends. A message still incomplete after
``MAX_MESSAGE_BYTES`` raises ``OversizedMessage``: a server that sends an endless line fails
its request instead of filling the client's memory.
"""

from __future__ import annotations

import json

_CHOICES = b'"choices":[{'
_USAGE_OBJ = b'"usage":{'
# One message's bytes: far above any message vLLM writes, even a long reply sent whole
# (stream_interval 0), and small enough that a buffer of it never matters to a client.
MAX_MESSAGE_BYTES = 16 << 20


class OversizedMessage(ValueError):
    """A stream message (an SSE event, a /generate object) longer than the cap."""

    failure_reason = "oversized_message"


def _capped(buf: bytearray) -> bytearray:
    if len(buf) > MAX_MESSAGE_BYTES:
        raise OversizedMessage(f"a stream message ran past {MAX_MESSAGE_BYTES} bytes "
                               "without its end; the reply is not a token stream")
    return buf


class SSEParser:
    __slots__ = ("buf", "completion_tokens", "prompt_tokens", "error", "done")

    def __init__(self) -> None:
        self.buf = bytearray()  # an unfinished message: grows in place, read by read
        self.completion_tokens: int | None = None
        self.prompt_tokens: int | None = None
        self.error: str | None = None
        self.done = False

    def feed(self, data: bytes) -> int:
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        if self.buf and b"\n\n" not in data and not (data[:1] == b"\n"
                                                    and self.buf[-1:] == b"\n"):
            self.buf += data  # no message ends in this read
            _capped(self.buf)
            return 0
        buf = bytes(self.buf + data) if self.buf else data
        end = buf.rfind(b"\n\n")
        if end < 0:
            self.buf = _capped(bytearray(buf))
            return 0
        done, self.buf = buf[: end + 2], _capped(bytearray(buf[end + 2:]))
        n = done.count(b"\n\n")
        # The usual case, decided for the whole read at once: every message is a vLLM token
        # chunk. JSON escapes quotes inside strings, so these patterns cannot hide in text.
        if (done.count(_CHOICES) == n and done.count(b"data: ") == n
                and _USAGE_OBJ not in done and done.startswith(b"data: ")):
            return n
        return sum(self._message(msg) for msg in done.split(b"\n\n") if msg)

    def flush(self) -> int:
        rest, self.buf = bytes(self.buf.strip()), bytearray()
        return self._message(rest) if rest else 0

    def _message(self, msg: bytes) -> int:
        lines = [ln for ln in msg.strip().split(b"\n") if ln.startswith(b"data:")]
        if not lines:  # comments (":ping"), event/id lines, blank keep-alives
            return 0
        payload = b"\n".join(ln[5:].strip() for ln in lines)
        if payload == b"[DONE]":
            self.done = True
            return 0
        try:
            data = json.loads(payload)
        except ValueError:
            self.error = f"undecodable stream message: {payload[:200]!r}"
            return 0
        return self._decoded(data)

    def _decoded(self, data: object) -> int:
        if not isinstance(data, dict):
            return 0
        usage = data.get("usage")
        if isinstance(usage, dict):
            if (ct := usage.get("completion_tokens")) is not None:
                self.completion_tokens = int(ct)
            if (pt := usage.get("prompt_tokens")) is not None:
                self.prompt_tokens = int(pt)
        if data.get("choices"):
            return 1
        if "error" in data:
            err = data["error"]
            self.error = str(err.get("message", err) if isinstance(err, dict) else err)
        return 0


class GenerateParser:
    __slots__ = ("buf", "sep", "completion_tokens", "prompt_tokens", "error", "done")

    def __init__(self) -> None:
        self.buf = bytearray()  # an unfinished object: grows in place, read by read
        self.sep: bytes | None = None
        self.completion_tokens: int | None = None
        self.prompt_tokens: int | None = None
        self.error: str | None = None
        self.done = False

    def feed(self, data: bytes) -> int:
        seps = (self.sep,) if self.sep is not None else (b"\0", b"\n")
        if self.buf and not any(sep in data for sep in seps):
            self.buf += data  # no object ends in this read
            _capped(self.buf)
            return 0
        buf = bytes(self.buf + data) if self.buf else data
        if self.sep is None:
            self.sep = b"\0" if b"\0" in buf else (b"\n" if b"\n" in buf else None)
            if self.sep is None:
                self.buf = _capped(bytearray(buf))
                return 0
        parts = buf.split(self.sep)
        self.buf = _capped(bytearray(parts.pop()))
        n = 0
        for msg in parts:
            n += 1 if msg[:9] == b'{"text": ' or msg[:8] == b'{"text":' else self._message(msg)
        return n

    def flush(self) -> int:
        rest, self.buf = bytes(self.buf.strip()), bytearray()
        return self._message(rest) if rest else 0

    def _message(self, msg: bytes) -> int:
        msg = msg.strip()
        if not msg:
            return 0
        try:
            data = json.loads(msg)
        except ValueError:
            self.error = f"undecodable stream message: {msg[:200]!r}"
            return 0
        if isinstance(data, dict) and "text" in data:
            return 1
        if isinstance(data, dict) and ("error" in data or "detail" in data):
            self.error = str(data.get("error") or data.get("detail"))
        return 0
