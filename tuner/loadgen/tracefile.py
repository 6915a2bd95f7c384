"""Read a trace file without trusting it: a regular file, in bounded lines, digested.

The path comes from a study file, which comes from the shared database, so the file may be
anything: a FIFO or a device (``/dev/zero``) that would block or never end, a sparse file
of gigabytes, one line of gigabytes. ``trace_lines`` refuses, with a ``TraceError`` naming
the path, what is not a regular file (told by ``stat`` before it is opened, then checked
again on the open descriptor, opened non-blocking so that a file swapped for a FIFO in
between cannot block), a file above ``MAX_TRACE_BYTES`` (before reading a byte, and again
while reading, should it grow), and a line above ``MAX_TRACE_LINE_BYTES``: memory stays
bounded by those caps whatever the file holds. ``TraceLines.sha256`` is the digest of the
bytes read, which ``tuner.loadgen.trace`` compares with the one stored at create.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tuner.errors import TraceError
from tuner.limits import MAX_TRACE_BYTES, MAX_TRACE_LINE_BYTES

_BOM = b"\xef\xbb\xbf"  # a spreadsheet's byte order mark, dropped from the first line
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class TraceLines:
    """The lines of one opened trace file, as text, each at most ``MAX_TRACE_LINE_BYTES``
    and all at most ``MAX_TRACE_BYTES``; ``sha256`` is the hex digest of the bytes read so
    far (of the whole file once ``lines`` is exhausted)."""

    def __init__(self, f: BinaryIO, name: str) -> None:
        self._f, self._name, self._hash, self._read = f, name, hashlib.sha256(), 0

    def __enter__(self) -> "TraceLines":
        return self

    def __exit__(self, *_exc: object) -> None:
        self._f.close()

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    def lines(self) -> Iterator[str]:
        """Each line decoded from UTF-8; ``TraceError`` for a line too long, a file past the
        cap or bytes that are not UTF-8."""
        number = 0
        while line := self._f.readline(MAX_TRACE_LINE_BYTES + 1):
            number += 1
            self._read += len(line)
            self._hash.update(line)
            if self._read > MAX_TRACE_BYTES:
                raise TraceError(f"{self._name}: larger than {MAX_TRACE_BYTES} bytes; "
                                 "replay a part of the trace")
            if len(line) > MAX_TRACE_LINE_BYTES:
                raise TraceError(f"{self._name}: line {number}: longer than "
                                 f"{MAX_TRACE_LINE_BYTES} bytes; one request a line")
            yield _text(line.removeprefix(_BOM) if number == 1 else line, number, self._name)


def _text(line: bytes, number: int, name: str) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(f"{name}: line {number}: not a text file (byte {e.start} of the "
                         "line is not UTF-8)") from None


def trace_lines(path: str | Path) -> TraceLines:
    """The trace file at ``path``, opened (a context manager that closes it); ``TraceError``
    for a path that is missing, not a regular file or larger than ``MAX_TRACE_BYTES``.
    Never blocks on a FIFO or device."""
    name = str(path)
    _check(_stat(name, os.stat, name), name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise TraceError(f"{name}: cannot read the trace: {e.strerror or e}") from None
    try:
        _check(_stat(fd, os.fstat, name), name)  # the path may have been swapped since the stat
    except TraceError:
        os.close(fd)
        raise
    os.set_blocking(fd, True)  # a regular file's reads never wait: O_NONBLOCK was for open
    return TraceLines(os.fdopen(fd, "rb"), name)


def _stat(target: str | int, how, name: str) -> os.stat_result:
    try:
        return how(target)
    except OSError as e:
        raise TraceError(f"{name}: cannot read the trace: {e.strerror or e}") from None


def _check(st: os.stat_result, name: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "a special file")
        raise TraceError(f"{name}: {kind}, not a regular file; give a trace file "
                         "(Mooncake JSONL or Azure CSV)")
    if st.st_size > MAX_TRACE_BYTES:
        raise TraceError(f"{name}: {st.st_size} bytes, larger than {MAX_TRACE_BYTES}; "
                         "replay a part of the trace")
