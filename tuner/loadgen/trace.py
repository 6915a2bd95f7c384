"""Read a workload trace: one frozen ``TraceRecord`` per recorded request (parsing only).

Two public formats, told apart by the file's first non-blank line:

- Mooncake (JSONL, ``kvcache-ai/Mooncake``'s ``FAST25-release/traces``): one object a line,
  ``{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}``;
  ``timestamp`` is milliseconds (an integer or a float), ``hash_ids`` is optional: the ids of
  the prompt's blocks, equal ids meaning equal leading content (``tuner.loadgen.replay``).
- Azure LLM inference trace (CSV, ``Azure/AzurePublicDataset``): the header
  ``TIMESTAMP,ContextTokens,GeneratedTokens``, then one row a request with an ISO date-time
  (``2023-11-16 18:15:46.6805900``; fractions past microseconds are cut, a ``+00:00`` offset
  is read). It has no prefix ids.

A record's ``arrival_s`` is its offset from the first request's timestamp. A bad file is
a ``TraceError`` (a ``UsageError``) on one line naming the file, the line and the reason:
what ``tuner.loadgen.tracefile`` refuses (not a regular file, past its size or line caps),
a timestamp that is no number below ``MAX_TIMESTAMP_MS`` or goes back, arrivals spanning
more than ``MAX_TRACE_SPAN_S``, lengths below 1 or above ``MAX_TOKENS``, JSON nested past
the parser's depth, more than ``MAX_REQUESTS`` requests, fewer than two, or a trace that
spans no time (its arrivals would have no rate to replay). Given the digest stored when
the study was created, a file whose bytes no longer have it is refused too.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuner.errors import TraceError
from tuner.limits import MAX_REQUESTS, MAX_TIMESTAMP_MS, MAX_TOKENS, MAX_TRACE_SPAN_S
from tuner.loadgen.tracefile import trace_lines

AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@dataclass(frozen=True, slots=True)  # (a million of them may be held: no __dict__ each)
class TraceRecord:
    """One recorded request: when it arrived (seconds after the trace's first request), its
    prompt and reply lengths in tokens, and the ids of its prompt's prefix blocks."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


class _Bad(ValueError):
    """A line's fault; ``read_trace`` adds the file and the line number."""


@dataclass(frozen=True)
class Trace:
    """A trace file's records and the sha256 (hex) of its bytes."""

    records: tuple[TraceRecord, ...]
    sha256: str


def read_trace(path: str | Path, sha256: str | None = None) -> tuple[TraceRecord, ...]:
    """The records of the trace at ``path``, in file order (``load_trace``)."""
    return load_trace(path, sha256).records


def load_trace(path: str | Path, sha256: str | None = None) -> Trace:
    """The trace at ``path`` and its digest; ``TraceError`` for a file that cannot be read
    (``tracefile``), is not a trace of either format, or, given ``sha256``, whose bytes
    have another digest. Blocking file I/O: at bench time, call it off the event loop."""
    try:
        with trace_lines(path) as f:
            records = parse_trace(f.lines(), str(path))
            digest = f.sha256
    except OSError as e:
        raise TraceError(f"{path}: cannot read the trace: {e.strerror or e}") from None
    if sha256 is not None and digest != sha256:
        raise TraceError(f"{path}: not the trace the study was made with (its sha256 is "
                         f"{digest[:12]}..., the study's {sha256[:12]}...); put that trace "
                         "back, or create a new study with this one")
    return Trace(records, digest)


def parse_trace(lines: Iterable[str], name: str) -> tuple[TraceRecord, ...]:
    """The records of ``lines`` (a file's lines); ``name`` names the file in errors."""
    numbered = ((i, line) for i, line in enumerate(lines, 1) if line.strip())
    first = next(numbered, None)
    if first is None:
        raise TraceError(f"{name}: empty trace; give a Mooncake JSONL or an Azure CSV file")
    rows = _chain(first, numbered)
    if first[1].lstrip().startswith("{"):
        stamped = _each(rows, name, _mooncake)
    elif tuple(c.strip() for c in first[1].strip().split(",")) == AZURE_HEADER:
        next(rows)
        stamped = _each(rows, name, _azure)
    else:
        raise TraceError(f"{name}: line {first[0]}: neither a Mooncake JSON object nor the "
                         f"Azure header {','.join(AZURE_HEADER)}")
    return _records(stamped, name)


def _chain(first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest


def _each(rows: Iterator[tuple[int, str]], name: str,
          parse: Any) -> Iterator[tuple[int, float, int, int, tuple[int, ...]]]:
    for number, line in rows:
        try:
            yield (number, *parse(line))
        except _Bad as e:
            raise TraceError(f"{name}: line {number}: {e}") from None


def _records(stamped: Iterator[tuple[int, float, int, int, tuple[int, ...]]],
             name: str) -> tuple[TraceRecord, ...]:
    out: list[TraceRecord] = []
    t0 = last = None
    for number, t, n_in, n_out, ids in stamped:
        t0 = t if t0 is None else t0
        if last is not None and t < last:
            raise TraceError(f"{name}: line {number}: timestamp goes back in time; sort the "
                             "trace by arrival")
        last = t
        if t - t0 > MAX_TRACE_SPAN_S:
            raise TraceError(f"{name}: line {number}: arrivals span more than "
                             f"{MAX_TRACE_SPAN_S:g} s after the first; replay a part of "
                             "the trace (or check the timestamps' unit)")
        if len(out) == MAX_REQUESTS:
            raise TraceError(f"{name}: line {number}: more than {MAX_REQUESTS} requests; "
                             "replay a part of the trace")
        out.append(TraceRecord(t - t0, n_in, n_out, ids))
    if len(out) < 2 or out[-1].arrival_s <= 0:
        raise TraceError(f"{name}: the trace needs at least two requests at different times "
                         "(its arrivals set the rate it replays)")
    return tuple(out)


def _mooncake(line: str) -> tuple[float, int, int, tuple[int, ...]]:
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise _Bad(f"not JSON: {e}") from None
    except RecursionError:
        raise _Bad("not a Mooncake record: JSON nested too deep") from None
    if not isinstance(obj, dict):
        raise _Bad("not a JSON object")
    for key in ("timestamp", "input_length", "output_length"):
        if key not in obj:
            raise _Bad(f"no '{key}'")
    t = obj["timestamp"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < MAX_TIMESTAMP_MS:
        raise _Bad(f"timestamp {_short(t)} is not a number of milliseconds in "
                   f"[0, {MAX_TIMESTAMP_MS})")
    n_in = _tokens(obj["input_length"], "input_length")
    ids = obj.get("hash_ids", [])
    if not isinstance(ids, list) or not all(_is_int(i) for i in ids):
        raise _Bad("hash_ids is not a list of integers")
    if len(ids) > n_in:
        raise _Bad(f"{len(ids)} hash_ids for a prompt of {n_in} tokens")
    return t / 1000.0, n_in, _tokens(obj["output_length"], "output_length"), tuple(ids)


def _azure(line: str) -> tuple[float, int, int, tuple[int, ...]]:
    try:
        cells = next(csv.reader([line]))
    except csv.Error as e:
        raise _Bad(f"not a CSV row: {e}") from None
    if len(cells) != 3:
        raise _Bad(f"{len(cells)} columns, not 3 ({','.join(AZURE_HEADER)})")
    stamp, n_in, n_out = (c.strip() for c in cells)
    try:
        when = datetime.fromisoformat(_microseconds(stamp))
    except ValueError:
        raise _Bad(f"TIMESTAMP {stamp!r} is not a date-time (2023-11-16 18:15:46.68)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when.timestamp(), _tokens(_int(n_in, "ContextTokens"), "ContextTokens"),
            _tokens(_int(n_out, "GeneratedTokens"), "GeneratedTokens"), ())


def _microseconds(stamp: str) -> str:
    """Azure's 2023 trace writes 100 ns ticks (7 digits); keep at most 6."""
    head, dot, tail = stamp.partition(".")
    if not dot:
        return stamp
    digits = len(tail) - len(tail.lstrip("0123456789"))
    return f"{head}.{tail[:min(digits, 6)]}{tail[digits:]}"


def _int(text: str, key: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _Bad(f"{key} {_short(text)} is not a whole number") from None


def _short(v: Any) -> str:
    """``v`` for an error line, a long one cut (a 400-digit number, a line-long text)."""
    if isinstance(v, int) and v.bit_length() > 128:  # (str() of one is slow, or refused)
        return f"(a number of {v.bit_length()} bits)"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _tokens(v: Any, key: str) -> int:
    if not _is_int(v) or not 1 <= v <= MAX_TOKENS:
        raise _Bad(f"{key} {_short(v)} is not a whole number of tokens in [1, {MAX_TOKENS}]")
    return v
