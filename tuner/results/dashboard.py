"""optuna-dashboard on a tuner storage, with the study-level figures it lacks.

``publish`` writes, on the study itself (study system attributes, a few short writes):
the metric names, three plotly figures (ids ``tuner-pareto``, ``tuner-hypervolume``,
``tuner-flag-effects``, overwritten on each call) and a note with the best flags and the
environment. ``serve`` runs the dashboard's own server (wsgiref) until interrupted.
"""

from __future__ import annotations

import signal
import warnings
from collections.abc import Callable

import optuna

from tuner.results.best import limits_for, pick_best
from tuner.results.flagdiff import changed_flags, flag_words
from tuner.results.gains import format_gains, gains
from tuner.results.records import load_records
from tuner.results.serve import serve_argv
from tuner.results.summary import Summary, summarise
from tuner.space import shell_line
from tuner.study import OpenStudy

FIGURE_IDS = ("tuner-pareto", "tuner-hypervolume", "tuner-flag-effects")


def note_markdown(s: Summary) -> str:
    """The study note: best flags per preference, the default baseline, the environment."""
    default = s.default.record if s.default else None
    lines = [f"## tuner: {s.name}", "", s.spec.description, "", f"{s.counts_line}.", ""]
    limits = limits_for(s.spec.slo.limits())
    for prefer in ("throughput", "latency"):
        pick = pick_best(s.records, s.spec.objectives, limits, prefer)
        r = pick.best or pick.closest
        lines.append(f"### Best flags for {prefer} (by {pick.metric})")
        if r is None:
            lines += ["", "No measured trial yet.", ""]
            continue
        met = "meets the SLOs" if pick.best else "**closest; misses the SLOs**"
        lines += ["", f"Trial {r.number} ({met}): {pick.metric} = {r.metric(pick.metric):,.1f}, "
                  f"gain over default {format_gains(gains(r, default, s.spec.objectives))}.",
                  "", f"Flags that differ from vLLM's defaults: "
                  f"`{flag_words(changed_flags(r.flags, s.space.defaults))}`", "",
                  "```", shell_line(serve_argv(s.spec, r.flags)), "```", ""]
    lines += ["### Environment", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in s.environment]
    return "\n".join(lines) + "\n"


def publish(opened: OpenStudy, say: Callable[[str], None] = lambda _: None) -> Summary:
    """Compute the study's results and store the figures and the note for the dashboard."""
    from optuna_dashboard import save_note, save_plotly_graph_object

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
    save_note(study, note_markdown(s))
    say(f"tuner: study {s.name}: figures and note published ({s.counts_line})")
    return s


def _sigterm_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def serve(storage: optuna.storages.BaseStorage, host: str, port: int) -> None:
    """Run optuna-dashboard until Ctrl-C or SIGTERM."""
    from optuna_dashboard import run_server

    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        run_server(storage, host=host, port=port)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
