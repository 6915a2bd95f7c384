"""`tuner report`: one HTML page, with its PNG figures written beside it.

The page has no scripts and no external resources (styles inline, images by relative
file name). Every text that comes from the study (names, flags, failure messages) is
escaped.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from tuner.results import charts
from tuner.results.best import pick_best, saturated_limits
from tuner.results.capacity_columns import capacity_columns
from tuner.results.flagdiff import changed_flags, flag_words
from tuner.results.lossy import accuracy_line
from tuner.results.gains import format_gains
from tuner.results.serve import serve_argv
from tuner.results.summary import Row, Summary, row
from tuner.results.table import CAPACITY_NOTE, REPEATS_HEAD, label, repeat_texts
from tuner.space import shell_line
from tuner.trials.capacity_view import figure
from tuner.trials.record import TrialRecord

STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f6f6f6;padding:.7em;white-space:pre-wrap;word-break:break-all}
.missed{color:#a00} .lossy{color:#850} .met{color:#070} img{max-width:100%;border:1px solid #eee}"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def table(head: Sequence[str], rows: Sequence[Sequence[object]], numeric: set[int] = frozenset(),
          cls: str = "") -> str:
    """An HTML table; cells are escaped, except those wrapped in ``Raw``."""
    out = [f'<table class="{esc(cls)}"><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head)
           + "</tr>"]
    for r in rows:
        cells = "".join(
            f'<td{" class=n" if i in numeric else ""}>'
            f'{c.html if isinstance(c, Raw) else esc(c)}</td>' for i, c in enumerate(r))
        out.append(f"<tr>{cells}</tr>")
    return "\n".join(out) + "</table>"


class Raw:
    """Markup built here from escaped parts."""

    def __init__(self, markup: str) -> None:
        self.html = markup


def _slo_cell(ok: bool) -> Raw:
    return Raw('<span class="met">met</span>' if ok else '<span class="missed">missed</span>')


SATURATED = (("tok/s", "output_throughput", "{:,.0f}"), ("p50 ITL ms", "median_itl_ms", "{:,.1f}"),
             ("p99 ITL ms", "p99_itl_ms", "{:,.1f}"), ("p99 TTFT ms", "p99_ttft_ms", "{:,.0f}"))


def _figures_of(s: Summary, median: bool = True
                ) -> tuple[list[str], Callable[[TrialRecord], list[str]]]:
    """The figures' headings and a record's cells: a capacity study's capacity first
    (``capacity_columns``), else the saturated run's (its p50 ITL only with ``median``)."""
    if s.spec.measures_capacity:
        cols = capacity_columns(s.spec)
    else:
        cols = [(h, m, partial(figure, metric=m, pattern=p)) for h, m, p in SATURATED
                if median or m != "median_itl_ms"]
    return [h for h, _, _ in cols], lambda r: [cell(r) for *_, cell in cols]


def _rows_table(s: Summary, rows: Sequence[Row]) -> str:
    heads, cells = _figures_of(s)
    head = ["trial", *heads, "SLOs", "gain vs default", "flags that differ from vLLM's defaults"]
    body = [[label(r), *cells(r.record), _slo_cell(r.slos_met),
             format_gains(dict(r.gains), dict(r.noise)), flag_words(r.changed)] for r in rows]
    return table(head, body, numeric=set(range(1, len(heads) + 1)))


def _best_section(s: Summary) -> str:
    limits = saturated_limits(s.spec.slo.limits(), s.spec.measures_capacity)
    default = s.default.record if s.default else None
    parts = ["<h2>Best flags</h2>"]
    for prefer in ("throughput", "latency"):
        pick = pick_best(s.records, s.spec.objectives, limits, prefer,
                         lossless_first=not s.spec.space.lossy)
        chosen = pick.best or pick.closest
        title = f"Best for {prefer} (by {pick.metric}, within the SLOs)"
        if chosen is None:
            parts.append(f"<h3>{esc(title)}</h3><p>No measured trial yet.</p>")
            continue
        r = row(chosen, default, s.spec, s.space)
        note = "" if pick.best else ('<p class="missed">No trial meets the SLOs; this is the '
                                     "closest one.</p>")
        lossy = accuracy_line(chosen)
        parts += [f"<h3>{esc(title)}: trial {chosen.number}</h3>", note,
                  _rows_table(s, [r]), f'<p class="lossy">{esc(lossy)}</p>' if lossy else "",
                  f'<pre class="serve">{esc(shell_line(serve_argv(s.spec, chosen.flags)))}</pre>']
    return "\n".join(parts)


def _trials_table(s: Summary) -> str:
    heads, cells = _figures_of(s, median=False)
    head = ["trial", "state", "outcome", "baseline", *heads,
            "flags that differ from vLLM's defaults", "note"]
    body = []
    for r in s.records:
        note = ""
        if r.failure:
            note = f"{r.failure.kind or ''}: {r.failure.message or ''}"[:300]
        elif r.duplicate_of is not None:
            note = f"same flags as trial {r.duplicate_of}"
        if accuracy_line(r):
            note = "; ".join(x for x in (note, accuracy_line(r)) if x)
        body.append([r.number, r.state, r.outcome or "-", r.baseline or "", *cells(r),
                     flag_words(changed_flags(r.flags, s.space.defaults)) if r.flags else "",
                     note])
    return table(head, body, numeric={0, *range(4, len(heads) + 4)})


def _effects_table(s: Summary) -> str:
    goals = s.spec.objectives
    head = ["flag", *(f"effect on {g.metric} %" for g in goals), "groups (n: mean of each "
            "objective)"]
    body = [[e.name, *(f"{v:.1f}" for v in e.spread_pct),
             "; ".join(f"{g.label} (n={g.n}: " + ", ".join(f"{m:,.1f}" for m in g.means) + ")"
                       for g in e.groups)] for e in s.effects]
    return table(head, body, numeric=set(range(1, len(goals) + 1)))


def _figures(s: Summary, out: Path) -> list[Path]:
    stem = out.with_suffix("")
    if not any(r.measured for r in s.records):
        return []
    written = [charts.pareto_png(s, Path(f"{stem}-pareto.png")),
               charts.hypervolume_png(s, Path(f"{stem}-hypervolume.png"))]
    if any(row.record.curve is not None for row in s.front):
        written.append(charts.curves_png(s, Path(f"{stem}-curves.png")))
    if s.effects:
        written.append(charts.effects_png(s, Path(f"{stem}-effects.png")))
    return written


def render(s: Summary, figures: Sequence[Path]) -> str:
    """The page's HTML (figures referenced by file name)."""
    env = table(["", ""], list(s.environment))
    default = (_rows_table(s, [s.default]) + "<pre>" + esc(shell_line(
        serve_argv(s.spec, s.default.record.flags))) + "</pre>") if s.default else \
        "<p>The default baseline has not been measured (yet); gains need it.</p>"
    front = _rows_table(s, s.front) if s.front else \
        "<p>No measured trial meets the SLOs yet.</p>"
    if s.spec.measures_capacity:
        front += f"<p>{esc(CAPACITY_NOTE)}</p>"
    again = repeat_texts(s)
    if again:
        front += f"<p>{esc(REPEATS_HEAD)}</p><ul>" + "".join(
            f"<li>{esc(line)}</li>" for line in again) + "</ul>"
    imgs = "".join(f'<p><img src="{esc(p.name)}" alt="{esc(p.stem)}"></p>' for p in figures) \
        or "<p>No measured trial yet: nothing to plot.</p>"
    effects = _effects_table(s) if s.effects else "<p>Too few measured trials to compare.</p>"
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>tuner report: {esc(s.name)}</title><style>{STYLE}</style></head><body>
<h1>tuner report: {esc(s.name)}</h1>
<p>{esc(s.spec.description)}</p><p>Generated {esc(when)}; {esc(s.counts_line)}.</p>
<h2>Environment</h2>{env}
{_best_section(s)}
<h2>Default baseline (vLLM's defaults)</h2>{default}
<h2>Pareto front</h2>
<p>Measured trials that meet every SLO and that no other such trial beats on all objectives.
Gain: percent better than the default on each objective (more throughput, less latency).</p>
{front}
<h2>Figures</h2>{imgs}
<p>Hypervolume reference point: {esc(s.reference_label)}.</p>
<h2>Which flags matter</h2>{effects}
<h2>All trials</h2>{_trials_table(s)}
</body></html>
"""


def write_report(s: Summary, out: Path) -> list[Path]:
    """Write the page and its figures; returns the files written (the page first)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    figures = _figures(s, out)
    out.write_text(render(s, figures), encoding="utf-8")
    return [out, *figures]

