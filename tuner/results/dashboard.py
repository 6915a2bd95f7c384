"""optuna-dashboard on a tuner storage, with the study-level figures it lacks.

``publish`` writes, on the study itself (study system attributes, short writes): the
metric names, three plotly figures (ids ``tuner-pareto``, ``tuner-hypervolume``,
``tuner-flag-effects``, overwritten on each call), a note with the best flags and the
environment, and a note per finished trial (outcome, key metrics, gains, the flags that
differ from vLLM's defaults). Notes are written only where they changed and never over a
note a user wrote in the dashboard; the trials themselves are never written. ``serve``
runs the dashboard (wsgiref, a thread per connection) until interrupted, read-only over
HTTP and only for requests addressed to this machine's loopback names
(``tuner.results.readonly``).
"""

from __future__ import annotations

import signal
import socket
import warnings
from collections.abc import Callable, Collection
from functools import partial
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIServer, make_server

import optuna

from tuner import optuna_adapter
from tuner.results.best import limits_for, pick_best, saturated_limits
from tuner.results.capacity import capacity_label
from tuner.results.capacity_columns import capacity_columns
from tuner.results.flagdiff import changed_flags, flag_words
from tuner.results.lossy import accuracy_line
from tuner.results.gains import format_gains, gains
from tuner.results.serve import serve_argv
from tuner.results.summary import Summary, summarise
from tuner.space import shell_line
from tuner.storage import OpenStudy
from tuner.trials import TrialRecord, load_records
from tuner.trials.capacity_view import capacity_line, figure

FIGURE_IDS = ("tuner-pareto", "tuner-hypervolume", "tuner-flag-effects")


def note_markdown(s: Summary) -> str:
    """The study note: best flags per preference, the default baseline, the environment."""
    default = s.default.record if s.default else None
    lines = [f"## tuner: {s.name}", "", s.spec.description, "", f"{s.counts_line}.", ""]
    # a ladder's SLOs are in its capacity already: they do not limit the saturated run
    limits = limits_for(saturated_limits(s.spec.slo.limits(), s.spec.measures_capacity))
    for prefer in ("throughput", "latency"):
        pick = pick_best(s.records, s.spec.objectives, limits, prefer,
                         lossless_first=not s.spec.space.lossy)
        r = pick.best or pick.closest
        lines.append(f"### Best flags for {prefer} (by {pick.metric})")
        if r is None:
            lines += ["", "No measured trial yet.", ""]
            continue
        met = "meets the SLOs" if pick.best else "**closest; misses the SLOs**"
        value = (capacity_label(r) if pick.metric == "capacity_rps"
                 else f"{r.metric(pick.metric):,.1f}")
        lines += ["", f"Trial {r.number} ({met}): {pick.metric} = {value}, "
                  f"gain over default {format_gains(gains(r, default, s.spec.objectives))}.",
                  *(["", capacity_line(r, s.spec.capacity.reference_rate) + "."]
                    if s.spec.measures_capacity else []),
                  "", f"Flags that differ from vLLM's defaults: "
                  f"`{flag_words(changed_flags(r.flags, s.space.defaults))}`", "",
                  *([accuracy_line(r), ""] if accuracy_line(r) else []),
                  "```", shell_line(serve_argv(s.spec, r.flags)), "```", ""]
    lines += ["### Environment", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in s.environment]
    return "\n".join(lines) + "\n"


TRIAL_METRICS = (("output_throughput", "output tokens/s", "{:,.0f}"),
                 ("median_itl_ms", "p50 ITL ms", "{:.1f}"), ("p99_itl_ms", "p99 ITL ms", "{:.1f}"),
                 ("p99_ttft_ms", "p99 TTFT ms", "{:,.0f}"))


def _metrics_table(s: Summary, r: TrialRecord) -> list[str]:
    """The trial's figures with their gains: a capacity study's capacity first
    (``capacity_columns``), else the saturated run's."""
    g = gains(r, s.default.record if s.default else None, s.spec.objectives)
    if s.spec.measures_capacity:
        cols = capacity_columns(s.spec)
    else:
        cols = [(name, m, partial(figure, metric=m, pattern=p)) for m, name, p in TRIAL_METRICS]
    lines = ["| metric | value | gain over default |", "|---|---|---|"]
    for name, metric, cell in cols:
        gain = "" if g.get(metric) is None else f"{g[metric]:+.1f}%"
        lines.append(f"| {name} | {cell(r)} | {gain} |")
    return lines


def slo_words(r: TrialRecord) -> str:
    """The SLO verdict as `tuner pareto` gives it: a load ladder's from its capacity."""
    if not r.capacity_held:
        return "missed at every level of the load ladder (capacity 0)"
    missed = [k.removeprefix("slo:") for k, v in r.constraints.items()
              if k.startswith("slo:") and v > 0]
    return "missed " + ", ".join(missed) if missed else "met"


def trial_note(s: Summary, r: TrialRecord) -> str:
    """A trial's note: outcome, key metrics with gains, SLOs, the flags that differ."""
    head = f"### Trial {r.number}: {r.outcome or r.state}"
    lines = [head + (f" (baseline {r.baseline})" if r.baseline else ""), ""]
    if r.duplicate_of is not None:
        lines += [f"Same effective flags as trial {r.duplicate_of}; its measurement.", ""]
    if r.metrics:
        lines += [*_metrics_table(s, r), "", f"SLOs: {slo_words(r)}", ""]
        if not r.client_valid:
            lines += ["The load generator was the bottleneck of this run: the numbers "
                      "understate the server.", ""]
    if r.failure:
        message = str(r.failure.message or "").replace("`", "'")[:500]
        lines += [f"Failure ({r.failure.kind or '?'}): `{message}`", ""]
    if r.flags:
        lines += ["Flags that differ from vLLM's defaults: "
                  f"`{flag_words(changed_flags(r.flags, s.space.defaults))}`"]
    if accuracy_line(r):  # the figures are in the trial's user attribute `accuracy`
        lines += ["", accuracy_line(r)]
    return "\n".join(lines) + "\n"


def _ours(note: str, head: str) -> bool:
    """Empty, or written by tuner: a note a user wrote in the dashboard is left alone."""
    return not note or note.startswith(head)


def _publish_trial_notes(study: optuna.Study, s: Summary) -> int:
    """Write each finished trial's note where it changed; returns how many were written.

    The study's attributes are read once (optuna-dashboard's public ``get_note`` and
    ``save_note`` read them all again for every note, which grows with the study)."""
    attrs = optuna_adapter.study_system_attrs(study)
    written = 0
    for r in s.records:
        if not r.told or r.trial_id is None:
            continue
        old = optuna_adapter.read_note(attrs, r.trial_id)
        body = trial_note(s, r)
        if old["body"] != body and _ours(old["body"], f"### Trial {r.number}: "):
            optuna_adapter.write_note(study, r.trial_id, old["version"] + 1, body, attrs)
            written += 1
    return written


def publish(opened: OpenStudy, say: Callable[[str], None] = lambda _: None) -> Summary:
    """Compute the study's results and store the figures and the note for the dashboard."""
    from optuna_dashboard import get_note, save_note, save_plotly_graph_object

    from tuner.results import figures

    study = opened.study
    s = summarise(opened.spec, opened.space, load_records(study))
    if study.metric_names is None:
        with warnings.catch_warnings():  # experimental since Optuna 3.2, stable in use
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([o.metric for o in opened.spec.objectives])
    makers = (figures.pareto_figure, figures.hypervolume_figure, figures.effects_figure)
    for graph_id, make in zip(FIGURE_IDS, makers):
        save_plotly_graph_object(study, make(s), graph_object_id=graph_id)
    body = note_markdown(s)
    old = get_note(study)
    if old != body and _ours(old, "## tuner: "):
        save_note(study, body)
    say(f"tuner: study {s.name}: writing the figures and the trial notes")
    notes = _publish_trial_notes(study, s)
    say(f"tuner: study {s.name}: figures, note and {notes} trial notes published "
        f"({s.counts_line})")
    return s


def _sigterm_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


class _ThreadedWSGIServer(ThreadingMixIn, WSGIServer):
    """A thread per connection, as optuna-dashboard's own CLI serves: a browser opens
    spare connections ahead of need, and a server of one thread that accepted such an
    idle one left every other request waiting until the browser dropped it."""

    daemon_threads = True  # an open browser tab never holds up Ctrl-C


class _IPv6Server(_ThreadedWSGIServer):
    address_family = socket.AF_INET6


def serve(storage: optuna.storages.BaseStorage, host: str, port: int,
          extra_hosts: Collection[str] = ()) -> None:
    """Run optuna-dashboard, read-only and for loopback ``Host`` names (plus
    ``extra_hosts``: ``tuner.results.readonly``), until Ctrl-C or SIGTERM; wsgiref with a
    thread per connection, so one idle connection never holds up the others."""
    from optuna_dashboard import wsgi

    from tuner.results.readonly import read_only

    app = read_only(wsgi(storage), extra_hosts)
    server_class = _IPv6Server if ":" in host else _ThreadedWSGIServer
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        with make_server(host, port, app, server_class=server_class) as httpd:
            httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
