"""Replay a trace (``tuner.loadgen.trace``): its arrivals at a speed-up, its prompts (pure).

Arrivals: the recorded offsets divided by ``speedup`` (1 = as recorded, 2 = twice the
traffic in half the time). A run that asks for more requests than the trace holds replays
it again, each pass starting one mean gap (span / (N - 1)) after the previous pass's last
arrival, so the offered rate stays ``offered_rate``. Capacity under SLOs is then the highest
``speedup`` at which the SLOs hold: a load ladder's level at a request rate replays the
trace at ``speedup_for(trace, rate)`` (``tuner.capacity.run.level_load``).

Prompts: token ids of the recorded input length. A record's ``hash_ids`` name its prompt's
leading blocks of ``PREFIX_BLOCK_TOKENS`` tokens each: a hash id always gets the same
tokens within a run, so requests that share leading hash ids share leading tokens and a
prefix cache sees the trace's sharing; the rest of the prompt is drawn fresh. Ids past the
prompt's length are ignored (the last block may be partial).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from tuner.loadgen.trace import TraceRecord

# Tokens per hash id: the Mooncake traces (FAST '25 release) hash prompts in blocks of 512
# tokens, and a trace does not record its block size, so ids mean what theirs mean.
PREFIX_BLOCK_TOKENS = 512

Trace = Sequence[TraceRecord]


def period_s(trace: Trace) -> float:
    """How long one pass of the trace lasts when it repeats, as recorded: its span plus one
    mean gap (``read_trace`` guarantees two records and a span above 0)."""
    span = trace[-1].arrival_s
    return span * len(trace) / (len(trace) - 1)


def offered_rate(trace: Trace, speedup: float) -> float:
    """Requests a second the replay offers at ``speedup``."""
    return len(trace) / period_s(trace) * speedup


def speedup_for(trace: Trace, rate: float) -> float:
    """The speed-up at which the replay offers ``rate`` requests a second: ``rate`` over
    the trace's own rate as recorded (``offered_rate`` at 1)."""
    return rate / offered_rate(trace, 1.0)


def arrivals_at(trace: Trace, speedup: float, n: int) -> list[float]:
    """Offsets in seconds of the first ``n`` arrivals of the replay at ``speedup``."""
    period, size = period_s(trace), len(trace)
    return [(i // size * period + trace[i % size].arrival_s) / speedup for i in range(n)]


def arrivals_within_at(trace: Trace, speedup: float, duration_s: float) -> list[float]:
    """Offsets of the replay's arrivals in ``[0, duration_s)`` (a run bounded by time)."""
    passes = math.ceil(duration_s * speedup / period_s(trace)) + 1
    return [t for t in arrivals_at(trace, speedup, passes * len(trace)) if t < duration_s]


def prompt_ids(record: TraceRecord, blocks: dict[int, tuple[int, ...]],
               draw: Callable[[int], tuple[int, ...]]) -> tuple[int, ...]:
    """``record.input_tokens`` token ids: its hash ids' blocks (drawn on first sight into
    ``blocks``, the run's map from hash id to tokens), then fresh ids from ``draw(n)``."""
    out: list[int] = []
    for h in record.hash_ids:
        if len(out) >= record.input_tokens:
            break
        if h not in blocks:
            blocks[h] = draw(PREFIX_BLOCK_TOKENS)
        out.extend(blocks[h][:record.input_tokens - len(out)])
    out.extend(draw(record.input_tokens - len(out)))
    return tuple(out)
