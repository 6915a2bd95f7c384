"""A load ladder's trial as every view words it (pure): its capacity first, with its 95 %
interval; the measured levels that capacity rests on; its p99s at the reference rate; the
saturated warm-up's figures, named as the warm-up's (the study's SLOs judge the ladder's
levels, never that run). Its SLO verdict is its capacity (``TrialRecord.capacity_held``).

The runner's progress line and ``tuner status`` read ``capacity_line``; the results' tables
put the same parts in columns. ``capacity_text`` words the capacity as
``tuner.results.capacity.capacity_label`` does (the runner may not import the results).
"""

from __future__ import annotations

from tuner.trials.record import CAPACITY_RPS, TrialRecord

# The saturated run's figures a capacity study keeps: (metric, name, format).
WARM_UP = (("output_throughput", "tok/s", "{:,.0f}"), ("p99_itl_ms", "p99 ITL ms", "{:,.1f}"),
           ("p99_ttft_ms", "p99 TTFT ms", "{:,.0f}"))
# The p99s at the reference rate: (metric, name, format).
REFERENCE = (("reference_p99_itl_ms", "p99 ITL ms", "{:,.1f}"),
             ("reference_p99_ttft_ms", "p99 TTFT ms", "{:,.0f}"))


def capacity_text(r: TrialRecord) -> str:
    """"3.61 [3.27-3.95]" (req/s, its 95 % interval), ">= 3.6 [3.4-3.6] censored", "3.6
    (no interval)" for a record stored before intervals, "-" without a capacity."""
    point = r.metric(CAPACITY_RPS)
    if point is None:
        return "-"
    ends = (r.metric(f"{CAPACITY_RPS}_lower"), r.metric(f"{CAPACITY_RPS}_upper"))
    if None in ends:
        return f"{point:.3g} (no interval)"
    span = f"[{ends[0]:.3g}-{ends[1]:.3g}]"
    return f">= {point:.3g} {span} censored" if r.metric("capacity_censored") else \
        f"{point:.3g} {span}"


def rests_on(r: TrialRecord) -> tuple[float, ...]:
    """The offered rates of the measured levels the capacity rests on: the level at its
    point, else the two around it (the highest when censored, the lowest at a capacity of
    0); () without a curve or a capacity."""
    point = r.metric(CAPACITY_RPS)
    if r.curve is None or point is None:
        return ()
    rates = sorted({lv.offered_rps for lv in r.curve.measured if lv.usable})
    if point in rates:
        return (point,)
    below = [x for x in rates if x < point][-1:]
    above = [x for x in rates if x > point][:1]
    return (*below, *above)


def levels_text(r: TrialRecord) -> str:
    """"4 and 8" (req/s), "6", or "-"."""
    return " and ".join(f"{x:.3g}" for x in rests_on(r)) or "-"


def figure(r: TrialRecord, metric: str, pattern: str) -> str:
    """The record's ``metric`` in ``pattern``, "-" where it has none."""
    value = r.metric(metric)
    return "-" if value is None else pattern.format(value)


def reference_text(r: TrialRecord, rate: float | None) -> str:
    """"at 4 req/s p99 ITL 15.0 ms, p99 TTFT 200 ms" ("" without a reference rate)."""
    if rate is None:
        return ""
    itl, ttft = (figure(r, m, p) for m, _, p in REFERENCE)
    return f"at {rate:g} req/s p99 ITL {itl} ms, p99 TTFT {ttft} ms"


def warm_up_text(r: TrialRecord) -> str:
    """"warm-up (saturated) 1,200 tok/s, p99 ITL 400.0 ms, p99 TTFT 8,233 ms"."""
    tput, itl, ttft = (figure(r, m, p) for m, _, p in WARM_UP)
    return f"warm-up (saturated) {tput} tok/s, p99 ITL {itl} ms, p99 TTFT {ttft} ms"


def capacity_line(r: TrialRecord, rate: float | None) -> str:
    """The trial in one line, capacity first: "capacity 3.61 [3.27-3.95] req/s on levels 3
    and 4; at 4 req/s p99 ITL ...; warm-up (saturated) ..."."""
    rests = rests_on(r)
    on = f" on level{'s' if len(rests) > 1 else ''} {levels_text(r)}" if rests else ""
    parts = [f"capacity {capacity_text(r)} req/s{on}", reference_text(r, rate),
             warm_up_text(r)]
    return "; ".join(p for p in parts if p)
