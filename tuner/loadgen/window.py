"""The steady-state window of a closed-loop run and confidence intervals by batch means (pure).

In closed loop all ``max_concurrency`` clients are busy only between the ramp and the drain:
every client sends at the start, and the rotation (a request ends, its client sends the next)
begins when the first request completes; the drain begins when the first client finds no
request left, that is at the last request's start. The window is ``[first completion, last
start]``. Whole-run averages mix in the ramp and the drain, and with 1,000 requests at 256
clients depend on where the four waves fall; figures over the window do not. A paced (open
loop) run has the same window: its load builds up until the first completion and drains
after the last arrival.

Inside the window, tokens are placed at their arrival (the first arrival's tokens at the
TTFT, later ones spread over their arrival's gap, as ``itl_per_token``) and ITLs at the
arrival that ends them. The window is cut into ``b`` batches of equal length, each at least
one mean request latency long (a request's own ITLs are correlated, and in closed loop the
load repeats with that period), at most ``MAX_BATCHES``. Each batch gives an output
throughput and a p99 ITL; the interval is the batch mean +- t(0.975, b - 1) * sd / sqrt(b),
and it is reported relative to the window's own figure (pooled over the whole window).
Fewer than ``MIN_BATCHES`` batches give no interval.

That interval is about the mean: it holds the configuration's true figure 95 times in 100.
Another run of the same configuration has an error of its own, as large, so the difference
of two runs' figures has twice the variance, and a second run lands inside the first one's
interval only about 83 times in 100 (P(|Z| < 1.96 / sqrt 2)). ``repeat_half_width`` is the
interval for that question, what a repeat run of the same length measures: t(0.975, b - 1) *
sd * sqrt(2 / b), sqrt 2 times the mean's half-width, and wider still when neighbouring
batches are correlated: a slow spell that lasts several batches (a neighbour's job on a
shared host, a long request mix) makes their mean vary more than sd^2 / b says. With ``lag1``
the batches' lag-1 autocorrelation (taken as 0 when negative), the variance of a mean of b
AR(1) batches is about sd^2 / b * (1 + lag1) / (1 - lag1), the usual batch-means
correction. It still assumes that runs differ only by noise of the kind seen inside one run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tuner.loadgen.client import RequestOutput
from tuner.loadgen.metrics import tpot
from tuner.slo import percentile_estimate

MAX_BATCHES = 20  # more batches than this only shortens them below what is needed
MIN_BATCHES = 4  # a t-interval from fewer is too wide to decide anything
# Student's t, two-sided 95 %, for 1..30 degrees of freedom (beyond: the normal's 1.96).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


@dataclass(frozen=True)
class Interval:
    """A figure over the window with its 95 % half-width (absolute and relative), and the
    half-width within which a repeat run of the same length falls (see the module's
    docstring)."""

    value: float
    half_width: float
    rel: float
    repeat_half_width: float = math.nan
    repeat_rel: float = math.nan
    lag1: float = math.nan  # the batch figures' lag-1 autocorrelation


@dataclass(frozen=True)
class Window:
    """The steady window (run clock, seconds) and the figures measured in it."""

    start: float
    end: float
    requests: int  # requests that completed inside the window
    batches: int
    output_throughput: Interval | None
    p99_itl_ms: Interval | None
    itl_metric: str  # "itl" (vLLM's, per message) or "itl_per_token"
    latency_trend: float | None = None  # see ``latency_trend``
    latency_trend_se: float | None = None  # its standard error (``latency_trend_fit``)

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def within(self, throughput_rel: float, itl_rel: float) -> bool:
        """Whether both half-widths are under their relative targets."""
        return (self.output_throughput is not None and self.p99_itl_ms is not None
                and self.output_throughput.rel <= throughput_rel
                and self.p99_itl_ms.rel <= itl_rel)

    def to_dict(self) -> dict:
        return {**asdict(self), "seconds": self.seconds}


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


def bounds(outputs: Sequence[RequestOutput]) -> tuple[float, float] | None:
    """``[first completion, last start]`` of the successful requests, or None if empty."""
    ok = [o for o in outputs if o.success]
    if len(ok) < 2:
        return None
    start = min(o.start_time + o.latency for o in ok)
    end = max(o.start_time for o in outputs)
    return (start, end) if end > start else None


def steady_window(outputs: Sequence[RequestOutput], itl_metric: str = "itl") -> Window | None:
    """The window of a closed-loop run and its intervals; None when there is no window."""
    span = bounds(outputs)
    if span is None:
        return None
    start, end = span
    ok = [o for o in outputs if o.success]
    token_t, itl_t, itl_v = _stamps(ok, itl_metric)
    mean_e2el = float(np.mean([o.latency for o in ok]))
    batches = int(min(MAX_BATCHES, (end - start) // mean_e2el)) if mean_e2el > 0 else 0
    done = sum(1 for o in ok if start <= o.start_time + o.latency <= end)
    pooled_rate = np.count_nonzero((token_t >= start) & (token_t < end)) / (end - start)
    in_window = itl_v[(itl_t >= start) & (itl_t < end)]
    pooled_p99 = float(np.percentile(in_window, 99)) * 1000.0 if in_window.size else math.nan
    throughput = p99 = None
    if batches >= MIN_BATCHES:
        edges = np.linspace(start, end, batches + 1)
        rates = np.histogram(token_t[token_t < end], edges)[0] / np.diff(edges)
        p99s = [_p99_ms(itl_v[(itl_t >= a) & (itl_t < b)]) for a, b in zip(edges, edges[1:])]
        throughput = _interval(pooled_rate, rates)
        p99 = _interval(pooled_p99, [x for x in p99s if not math.isnan(x)])
    trend = latency_trend_fit(steady_requests(ok, start, end))
    return Window(float(start), float(end), done, batches, throughput, p99, itl_metric,
                  None if trend is None else trend[0], None if trend is None else trend[1])


def steady_requests(outputs: Sequence[RequestOutput], start: float,
                    end: float) -> list[RequestOutput]:
    """The requests (failed ones too) that lived in the steady state of a window ``[start,
    end]``: those that started in it, at least one median latency (of the successful
    ones) before its end. A request that starts later spends its last tokens in the drain,
    whose falling load shortens them; one that starts before the window, in the ramp."""
    ok = [o.latency for o in outputs if o.success]
    last = end - (float(np.median(ok)) if ok else 0.0)
    return [o for o in outputs if start <= o.start_time <= last]


def steady_samples(outputs: Sequence[RequestOutput], start: float,
                   end: float) -> dict[str, np.ndarray]:
    """The latency samples (seconds, in the order they were observed) of the steady state of
    a paced run's window ``[start, end]``: the TTFT of the requests that started in it, the
    ITL (vLLM's, per message) of the gaps that ended in it, and the TPOT and E2EL of its
    ``steady_requests``. The ramp and the drain run at a lighter load, and their gaps would
    flatter a short run's p99s. A figure without a sample is left out."""
    ok = sorted((o for o in outputs if o.success), key=lambda o: o.start_time)
    if not ok:
        return {}
    _, itl_t, itl_v = _stamps(ok, "itl")
    order = np.argsort(itl_t, kind="stable")
    itl_t, itl_v = itl_t[order], itl_v[order]
    steady = steady_requests(ok, start, end)
    samples = (("ttft", [o.ttft for o in ok if start <= o.start_time <= end]),
               ("itl", itl_v[(itl_t >= start) & (itl_t <= end)]),
               ("tpot", [tpot(o) for o in steady if (o.output_tokens or 1) > 1]),
               ("e2el", [o.latency for o in steady]))
    return {name: np.asarray(values, dtype=float) for name, values in samples if len(values)}


def steady_figures(outputs: Sequence[RequestOutput], start: float,
                   end: float) -> dict[str, float]:
    """The p99s (ms, as ``p99_ttft_ms``... in ``tuner.loadgen.metrics``) of
    ``steady_samples``."""
    return {f"p99_{name}_ms": _p99_ms(values)
            for name, values in steady_samples(outputs, start, end).items()}


def steady_estimates(outputs: Sequence[RequestOutput], start: float,
                     end: float) -> dict[str, dict]:
    """The p99s of ``steady_samples`` with their intervals (``tuner.slo.percentile_estimate``,
    ms; its JSON), as ``p99_ttft_ms``...; a figure with too few samples is left out."""
    out = {}
    for name, values in steady_samples(outputs, start, end).items():
        est = percentile_estimate(values * 1000.0, 99.0)
        if est is not None:
            out[f"p99_{name}_ms"] = est.to_json()
    return out


def latency_trend(outputs: Sequence[RequestOutput]) -> float | None:
    """How fast the time in system grows: the least-squares slope of the end-to-end latency
    of the successful ``outputs`` (a window's ``steady_requests``) against their start
    times (seconds per second, so the same in simulated and wall time); None with fewer
    than 3 of them.

    A server that keeps up with its load has no trend (each request waits about as long as
    the one before). One that does not builds a backlog: a FIFO queue served at ``mu``
    with arrivals at ``lambda > mu`` makes each request wait ``lambda / mu - 1`` seconds
    longer per second of arrivals, so the trend reads how far the load is above what the
    server sustains, as a share of it."""
    fit = latency_trend_fit(outputs)
    return None if fit is None else fit[0]


def latency_trend_fit(outputs: Sequence[RequestOutput]) -> tuple[float, float | None] | None:
    """``latency_trend`` and its standard error (None with fewer than 4 requests). The
    latencies of neighbouring requests are correlated (they queue together), so the
    error is inflated by the residuals' lag-1 autocorrelation, as for a mean of AR(1)
    samples."""
    pts = sorted((o.start_time, o.latency) for o in outputs if o.success)
    if len(pts) < 3:
        return None
    t, lat = np.asarray(pts, dtype=float).T
    if np.ptp(t) <= 0:
        return None
    slope, icpt = np.polyfit(t, lat, 1)
    if len(pts) < 4:
        return float(slope), None
    resid = lat - (slope * t + icpt)
    se = math.sqrt(float(resid @ resid) / (len(pts) - 2) / float(((t - t.mean()) ** 2).sum()))
    rho = max(0.0, lag1(resid))
    return float(slope), se * math.sqrt((1.0 + rho) / (1.0 - rho))


def _stamps(ok: Sequence[RequestOutput], itl_metric: str):
    """Token arrival times, and the ITLs with the times they end, as arrays."""
    token_t, itl_t, itl_v = [], [], []
    for o in ok:
        first = o.start_time + o.ttft
        per_token = np.asarray(o.itl_per_token, dtype=float)
        later = first + np.cumsum(per_token)
        token_t.append(np.full(max(0, (o.output_tokens or 1) - per_token.size), first))
        token_t.append(later)
        values = np.asarray(o.itl if itl_metric == "itl" else o.itl_per_token, dtype=float)
        itl_t.append(first + np.cumsum(values))
        itl_v.append(values)
    return (np.concatenate(token_t), np.concatenate(itl_t) if itl_t else np.zeros(0),
            np.concatenate(itl_v) if itl_v else np.zeros(0))


def _p99_ms(values: np.ndarray) -> float:
    return float(np.percentile(values, 99)) * 1000.0 if values.size else math.nan


def _interval(value: float, samples: Sequence[float]) -> Interval | None:
    if len(samples) < MIN_BATCHES or math.isnan(value):
        return None
    arr, value = np.asarray(samples, dtype=float), float(value)
    half = t975(arr.size - 1) * float(np.std(arr, ddof=1)) / math.sqrt(arr.size)
    rho = lag1(arr)
    # Two runs' errors, each of variance sd^2 / b, inflated for correlated batches (AR(1)).
    inflation = (1.0 + max(0.0, rho)) / (1.0 - max(0.0, rho))
    repeat = half * math.sqrt(2.0 * inflation)
    return Interval(value, half, _rel(half, value), repeat, _rel(repeat, value), rho)


MAX_LAG1 = 0.9  # past this the AR(1) factor (19) says only that the window is one slow drift


def lag1(samples: np.ndarray) -> float:
    """The lag-1 autocorrelation of a series (0 for a constant one), at most ``MAX_LAG1``."""
    dev = samples - samples.mean()
    denom = float(dev @ dev)
    return min(MAX_LAG1, float(dev[1:] @ dev[:-1]) / denom) if denom > 0 else 0.0


def _rel(half: float, value: float) -> float:
    return half / value if value > 0 else math.inf
