"""A paced run that has already missed its SLO, whatever its later requests measure (pure).

A ladder level that misses its SLOs only bounds the server's capacity from above; running
its arrivals to the end buys no information once the miss is certain. ``MissWatch`` reads
the requests sent so far (finished or still streaming) and says when it is: only then, so
a level it stops would have failed had it run whole.

Certain means: the p99 that the run is judged on (``tuner.loadgen.window.steady_figures``
and ``tuner.loadgen.metrics``: numpy's linear percentile over the samples of the steady
window, which starts at the first completion, or over the whole run) must exceed its
limit for any completion of the run. A run's samples never exceed a known count ``n_max``
(its planned requests for TTFT; the sum of their ``max_tokens - 1`` for ITL), and a sample
over the limit stays over it. With ``k`` samples over the limit among ``n <= n_max``, the
p99 (at rank ``0.99 (n - 1)``, interpolated) lies between two of the top ``k`` samples as
soon as ``k >= 0.01 n_max + 2`` (``must_exceed``), so it exceeds the limit. The samples
counted are those in the steady window so far, which is a subset of the whole run's, so
both verdicts are fixed. A request still waiting for its first token past the TTFT limit
counts as a TTFT over it (if it fails instead, the run fails for that). A failed request
is a certain miss too: a level with a failure never holds (``tuner.capacity.run.level_of``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tuner.loadgen.client import RequestOutput

FAILED, TTFT, ITL = "a request failed", "p99 TTFT", "p99 ITL"


def must_exceed(k: int, n_max: int) -> bool:
    """Whether numpy's 99th percentile (linear) of any ``n <= n_max`` samples, ``k`` of
    which exceed a limit, exceeds it: ``k >= 0.01 n_max + 2``.

    Sorted ascending, the top ``k`` exceed; the percentile interpolates between the
    samples at ``i = floor(0.99 (n - 1))`` and ``i + 1``, both in the top ``k`` when ``i >=
    n - k``, which ``0.99 (n - 1) - 1 >= n - k`` guarantees."""
    return k >= 0.01 * n_max + 2


@dataclass(frozen=True)
class MissLimits:
    """What makes a run's miss certain: the p99 TTFT and ITL limits (wall seconds; None:
    no such SLO) and upper bounds of the run's TTFT samples (``requests``) and ITL
    samples (``gaps``; None: unknown, and the ITL is not watched)."""

    ttft_s: float | None
    itl_s: float | None
    requests: int
    gaps: int | None = None


@dataclass
class _Seen:
    """How far one request was read: gaps counted, the time the last counted one ended,
    and whether its TTFT was counted."""

    gaps: int = 0
    at: float = 0.0
    ttft: bool = False


@dataclass
class MissWatch:
    """Counts, incrementally, the samples over the limits among requests sent so far.

    ``check(sent, done, now)`` takes every request sent (``sent``, in send order, each a
    ``RequestOutput`` that its stream fills in as tokens arrive), the finished ones
    (``done``) and the run's clock; it returns why the run's miss is certain (``FAILED``,
    ``TTFT``, ``ITL``), or None. Each call reads only what arrived since the last one, so a
    watcher can call it often from the client's event loop."""

    limits: MissLimits
    start: float | None = None          # the steady window's start: the first completion
    over_ttft: int = 0
    over_itl: int = 0
    _seen: dict[int, _Seen] = field(default_factory=dict)

    def check(self, sent: Sequence[RequestOutput], done: Sequence[RequestOutput],
              now: float) -> str | None:
        if any(not o.success for o in done):
            return FAILED
        if self.start is None:
            ends = [o.start_time + o.latency for o in done if o.success]
            if not ends:
                return None
            self.start = min(ends)
        for out in sent:
            if out.start_time >= self.start:
                self._count_ttft(out, now)
            self._count_itl(out)
        lim = self.limits
        if lim.ttft_s is not None and must_exceed(self.over_ttft, lim.requests):
            return TTFT
        if lim.itl_s is not None and lim.gaps is not None and must_exceed(self.over_itl,
                                                                          lim.gaps):
            return ITL
        return None

    def _count_ttft(self, out: RequestOutput, now: float) -> None:
        limit = self.limits.ttft_s
        seen = self._seen.setdefault(id(out), _Seen())
        if limit is None or seen.ttft:
            return
        waited = out.ttft if out.ttft > 0 else now - out.start_time
        if waited > limit:
            seen.ttft = True
            self.over_ttft += 1

    def _count_itl(self, out: RequestOutput) -> None:
        limit = self.limits.itl_s
        if limit is None or self.limits.gaps is None or out.ttft <= 0:
            return
        seen = self._seen.setdefault(id(out), _Seen())
        if not seen.gaps:
            seen.at = out.start_time + out.ttft
        gaps = out.itl[seen.gaps:]
        for gap in gaps:
            seen.at += gap
            if gap > limit and seen.at >= self.start:
                self.over_itl += 1
        seen.gaps += len(gaps)
