"""Text tables for the terminal (pure): the Pareto front and one-line trial summaries."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tuner.results.capacity_columns import capacity_columns
from tuner.results.flagdiff import flag_words
from tuner.results.gains import format_gains
from tuner.results.lossy import accuracy_line, accurate
from tuner.results.summary import Row, Summary

COLUMNS = (("output_throughput", "TOK/S", "{:,.0f}"), ("median_itl_ms", "P50 ITL", "{:.1f}"),
           ("p99_itl_ms", "P99 ITL", "{:.1f}"), ("p99_ttft_ms", "P99 TTFT", "{:,.0f}"))


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def label(r: Row) -> str:
    """'7' or '0 [default]' (baselines marked)."""
    n = str(r.record.number)
    return f"{n} [{r.record.baseline}]" if r.record.baseline else n


def metric_columns(summary: Summary) -> list[tuple[str, str, str]]:
    """The fixed columns plus any objective not among them."""
    cols = list(COLUMNS)
    known = {c[0] for c in cols}
    cols += [(o.metric, o.metric.upper(), "{:,.2f}") for o in summary.spec.objectives
             if o.metric not in known]
    return cols


def spread_cell(r: Row, summary: Summary) -> str:
    """'3 (2.1%/14%)': runs, and each objective's range over them relative to the median."""
    spreads = [r.record.spread.get(o.metric) for o in summary.spec.objectives]
    if not any(spreads):
        return "1"
    n = max(s.n for s in spreads if s)
    return f"{n} (" + "/".join("-" if s is None else f"{100 * s.rel:.1f}%" for s in spreads) + ")"


def figure_cells(summary: Summary) -> tuple[list[str], Callable[[Row], list[str]]]:
    """The figures' headings and a row's cells: a capacity study's capacity first
    (``capacity_columns``), else the fixed columns and the other objectives."""
    if summary.spec.measures_capacity:
        cols = capacity_columns(summary.spec)
        return [h.upper() for h, _, _ in cols], lambda r: [cell(r.record) for *_, cell in cols]
    fixed = metric_columns(summary)
    return [c[1] for c in fixed], lambda r: [_fmt(r.record.metric(m), p) for m, _, p in fixed]


def front_table(summary: Summary, rows: Sequence[Row] | None = None) -> str:
    """The Pareto front as an aligned table; flags that differ from vLLM's defaults last."""
    rows = list(summary.front if rows is None else rows)
    heads, cells = figure_cells(summary)
    gain_head = "GAIN " + "/".join(o.metric.split("_")[0] if o.metric.endswith("throughput")
                                   else o.metric.removesuffix("_ms")
                                   for o in summary.spec.objectives)
    repeated = any(r.record.spread for r in rows)  # confirmation runs: medians, spread
    head = ["TRIAL", *heads, *(["RUNS (SPREAD)"] if repeated else []),
            "SLOS", gain_head, "FLAGS (vs vLLM default)"]
    body = [[label(r), *cells(r),
             *([spread_cell(r, summary)] if repeated else []),
             "met" if r.slos_met else "MISSED", format_gains(dict(r.gains), dict(r.noise)),
             flag_words(r.changed)] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = []
    for line in [head, *body]:
        cells = [str(c).rjust(w) if 0 < i < len(head) - 1 else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(line, widths))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def pareto_text(summary: Summary) -> str:
    """The `tuner pareto` output: header, table, the default baseline for reference."""
    objectives = ", ".join(f"{o.direction} {o.metric}" for o in summary.spec.objectives)
    out = [f"study {summary.name}: {len(summary.front)} Pareto-optimal of "
           f"{summary.counts_line} ({objectives}; SLOs: "
           f"{dict(summary.environment)['SLOs']})", "", front_table(summary)]
    d = summary.default
    if d is None:
        out += ["", "default baseline: not measured yet (gains need it)"]
    elif all(r.record.number != d.record.number for r in summary.front):
        out += ["", "default baseline, for reference:", front_table(summary, [d])]
    out += repeat_lines(summary)
    out += accuracy_lines(summary)
    out += ["", "GAIN: percent better than vLLM's default on each objective "
                "(more throughput, less latency: both positive)."]
    if summary.spec.measures_capacity:
        out += [CAPACITY_NOTE]
    if any(r.record.spread for r in summary.front) or (d is not None and d.record.spread):
        out += ["RUNS (SPREAD): confirmation runs (search.confirm) and each objective's range "
                "over them; figures are their medians. A gain inside the spread is "
                "'within noise'."]
    return "\n".join(out)


CAPACITY_NOTE = ("CAPACITY: the most requests/s within every SLO, with its 95 % interval, "
                 "read from the load ladder's levels (ON LEVELS: those it rests on); SLOS: "
                 "met when that capacity is above 0. WARM-UP: the saturated run before the "
                 "ladder, never judged against the SLOs.")


REPEATS_HEAD = "same flags measured again (a row shows the first trial of its flags):"


def repeat_texts(summary: Summary) -> list[str]:
    """One 'trial 12: also trial 14 (objective figures)' per later trial of a shown row's
    flags, in trial order: a row is its configuration's first trial, and a second start of
    the same flags is its spread."""
    rows = [*summary.front, *([summary.default] if summary.default else [])]
    rows = [r for r in {r.record.number: r for r in rows}.values() if r.repeats]
    formats = {m: f for m, _, f in metric_columns(summary)}
    out = []
    for r in sorted(rows, key=lambda r: r.record.number):
        for again in r.repeats:
            figures = ", ".join(f"{o.metric} {_fmt(again.metric(o.metric), formats[o.metric])}"
                                for o in summary.spec.objectives)
            out.append(f"trial {r.record.number}: also trial {again.number} ({figures})")
    return out


def repeat_lines(summary: Summary) -> list[str]:
    """``repeat_texts`` under their heading, as `tuner pareto` prints them (none: no lines)."""
    lines = repeat_texts(summary)
    return ["", REPEATS_HEAD, *(f"  {line}" for line in lines)] if lines else []


def accuracy_lines(summary: Summary) -> list[str]:
    """What the accuracy guard says about the front's lossy trials and those it refused."""
    limit = summary.spec.accuracy_limit
    if limit is None:
        return []
    out = ["", f"lossy flags opted in: {', '.join(summary.spec.space.lossy)}; accuracy "
               f"limit: token agreement >= {limit:g} with the default's greedy outputs"]
    out += [f"  trial {r.record.number}: {accuracy_line(r.record)}" for r in summary.front
            if accuracy_line(r.record)]
    front = {r.record.number for r in summary.front}
    refused = [r for r in summary.records if r.measured and not accurate(r)
               and r.number not in front]
    if refused:
        out.append("below the accuracy limit (infeasible, never on the front or best):")
        out += [f"  trial {r.number}: {accuracy_line(r)}" for r in refused]
    return out
