"""Benchmark metrics, defined exactly as vLLM's ``calculate_metrics`` (pure functions).

For each successful request: output tokens = the server's ``completion_tokens`` (else the
number of token messages), TPOT = (E2EL - TTFT) / (output tokens - 1) when output tokens > 1,
ITLs (one per token message) pooled over all requests. Beside vLLM's: ``*_itl_per_token_ms``
(each arrival's gap divided among its tokens, see ``client``) and the gap counts of ``gaps``
(messages, tokens, multi-token messages, zero gaps, the shares of gaps observed). Statistics are numpy's mean, median, std and ``percentile``
(linear interpolation); an empty list counts as ``[0]``, as vLLM. Throughputs divide by the
run's duration. Keys match vLLM's result JSON where one exists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from tuner.loadgen.client import RequestOutput
from tuner.loadgen.gaps import gap_counts
from tuner.loadgen.spec import SLO

PERCENTILES = (90, 99)
THROUGHPUT_KEYS = ("request_throughput", "output_throughput", "total_token_throughput",
                   "goodput", "request_goodput", "steady_output_throughput")


def calculate_metrics(outputs: Sequence[RequestOutput], dur_s: float,
                      slo: SLO | None = None) -> dict[str, float]:
    """The run's metrics from its request outputs and duration (seconds)."""
    ok = [o for o in outputs if o.success]
    out_lens = [o.output_tokens or 1 for o in ok]
    ttfts = [o.ttft for o in ok]
    e2els = [o.latency for o in ok]
    tpots = [tpot(o) for o in ok if (o.output_tokens or 1) > 1]
    itls = [x for o in ok for x in o.itl]
    per_token = [x for o in ok for x in o.itl_per_token]
    total_in, total_out = sum(o.prompt_len for o in ok), sum(out_lens)
    good = sum(1 for o in ok if meets_slo(o, slo)) if slo and not slo.empty else len(ok)
    m: dict[str, float] = {
        "duration": dur_s,
        "completed": len(ok),
        "failed": len(outputs) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / dur_s,
        "output_throughput": total_out / dur_s,
        "total_token_throughput": (total_in + total_out) / dur_s,
        "goodput": good / dur_s,
        "request_goodput": good / dur_s,
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els),
                         ("itl_per_token", per_token)):
        m.update(summarize(name, values))
    m.update(gap_counts(outputs))
    if slo and not slo.empty:
        m["slo_met"] = float(run_meets_slo(m, slo))
    return m


def tpot(o: RequestOutput) -> float:
    """Time per output token after the first; 0 for a single-token output (as vLLM)."""
    n = o.output_tokens or 1
    return (o.latency - o.ttft) / (n - 1) if n > 1 else 0.0


def summarize(name: str, values_s: Sequence[float]) -> dict[str, float]:
    """mean/median/std/p90/p99 of ``values_s`` (seconds) as ``..._<name>_ms`` keys."""
    arr = np.asarray(values_s if len(values_s) else [0.0], dtype=float) * 1000.0
    out = {f"mean_{name}_ms": float(np.mean(arr)), f"median_{name}_ms": float(np.median(arr)),
           f"std_{name}_ms": float(np.std(arr))}
    for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES)):
        out[f"p{p}_{name}_ms"] = float(v)
    return out


def meets_slo(o: RequestOutput, slo: SLO | None) -> bool:
    """Whether one successful request is good, as ``vllm bench serve --goodput`` counts
    it: its TTFT, TPOT and E2EL within ``slo``'s. vLLM's goodput has no ITL objective,
    and neither has ours: the ITL limit judges the run's p99, not a request."""
    if slo is None:
        return o.success
    checks = (
        (slo.ttft_p99_ms, o.ttft),
        (slo.tpot_ms, tpot(o)),
        (slo.e2el_ms, o.latency),
    )
    return o.success and all(lim is None or v * 1000.0 <= lim for lim, v in checks)


def run_meets_slo(m: dict[str, float], slo: SLO) -> bool:
    return all(lim is None or m[key] <= lim for lim, key in (
        (slo.ttft_p99_ms, "p99_ttft_ms"), (slo.itl_p99_ms, "p99_itl_ms"),
        (slo.tpot_ms, "p99_tpot_ms"), (slo.e2el_ms, "p99_e2el_ms")))


def count_failures(outputs: Sequence[RequestOutput]) -> dict[str, int]:
    """Failed requests by reason."""
    return dict(Counter(o.reason or "unknown" for o in outputs if not o.success))


def to_simulated_time(metrics: dict[str, float], time_scale: float) -> dict[str, float]:
    """Convert metrics measured against a server running ``time_scale`` times faster than
    real time back to its simulated time: latencies and durations times ``time_scale``,
    throughputs divided by it; counts unchanged."""
    if time_scale == 1.0:
        return dict(metrics)
    out = {}
    for key, value in metrics.items():
        if key.endswith("_ms") or key == "duration":
            out[key] = value * time_scale
        elif key in THROUGHPUT_KEYS:
            out[key] = value / time_scale
        else:
            out[key] = value
    return out


def to_wall_time(slo: SLO | None, time_scale: float) -> SLO | None:
    """``slo`` (simulated time) for latencies measured on the wall clock against a server
    running ``time_scale`` times faster: every limit divided by it."""
    if slo is None or time_scale == 1.0:
        return slo
    return SLO(*(None if v is None else v / time_scale for v in (
        slo.ttft_p99_ms, slo.itl_p99_ms, slo.tpot_ms, slo.e2el_ms)))


def noise_estimate(outputs: Sequence[RequestOutput]) -> dict[str, float]:
    """Run-to-run noise seen inside one run: the steady part of the run (from its first token
    to the last request's start, after which load only drains) is cut into two halves by time;
    each half's output rate (token messages in it over its length) and p99 ITL (of the tokens
    in it) are compared as |a-b|/mean(a,b)."""
    ok = [o for o in outputs if o.success and o.chunks]
    if len(ok) < 4:
        return {}
    stamps = [o.start_time + o.ttft + np.concatenate(([0.0], np.cumsum(o.itl))) for o in ok]
    times = np.concatenate(stamps)
    itl_times = np.concatenate([s[1:] for s in stamps])
    itls = np.concatenate([np.asarray(o.itl, dtype=float) for o in ok])
    t_a, t_b = times.min(), max(o.start_time for o in ok)
    if t_b - t_a <= 0:  # everything started at once: use the whole run
        t_b = times.max()
    mid = (t_a + t_b) / 2
    rate, p99 = [], []
    for lo, hi in ((t_a, mid), (mid, t_b)):
        rate.append(np.count_nonzero((times >= lo) & (times < hi)) / (hi - lo) if hi > lo else 0)
        window = itls[(itl_times >= lo) & (itl_times < hi)]
        p99.append(float(np.percentile(window, 99)) if window.size else 0.0)
    return {"output_throughput_rel_diff": _rel(*rate), "p99_itl_rel_diff": _rel(*p99),
            "window_s": float(t_b - t_a)}


def _rel(a: float, b: float) -> float:
    mean = (a + b) / 2
    return float(abs(a - b) / mean) if mean > 0 else 0.0
