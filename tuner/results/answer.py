"""What `tuner best` prints on stdout, as a value (pure over a ``Summary``): the command
and the HTTP API both answer through ``answer``, which picks ``capacity_answer`` for a
study that measures load ladders and ``best_answer`` for the others, so they cannot drift.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tuner.errors import UsageError
from tuner.results import capacity
from tuner.results.best import limits_for, looser_than_slo, pick_best, ruled_out, user_limits
from tuner.results.flagdiff import changed_flags
from tuner.results.gains import format_gains, gains
from tuner.results.lossy import accuracy_doc, accuracy_line
from tuner.results.serve import config_yaml, serve_argv, trial_document
from tuner.results.summary import Summary
from tuner.space import shell_line
from tuner.trials import default_baseline, describe_counts
from tuner.trials.record import ACCURACY


@dataclass(frozen=True)
class BestAnswer:
    text: str           # `tuner best`'s stdout ("" when there is no measured trial)
    ok: bool            # a trial meets the limits
    error: str | None   # `tuner best`'s error line when not ok
    about: str = ""     # one line on the chosen trial (the cli format's comment)


def answer(summary: Summary, fmt: str = "cli", max_itl_p99: float | None = None,
           max_ttft_p99: float | None = None, prefer: str = "throughput",
           rate: float | None = None) -> BestAnswer:
    """`tuner best` for any study: from the stored curves on a capacity study (``prefer``
    does not apply there), else the best trial under the limits. ``rate`` (requests/s, a
    checked ``rate_of``) applies to a capacity study only: UsageError on another."""
    if summary.spec.measures_capacity:
        return capacity_answer(summary, fmt, max_itl_p99, max_ttft_p99, rate)
    if rate is not None:
        raise UsageError(f"rate: study {summary.name} measures no load ladder (add a "
                         "[capacity] section to a new study: docs/studies.md)")
    return best_answer(summary, fmt, max_itl_p99, max_ttft_p99, prefer)


def rate_of(text: str) -> float:
    """A request rate as given on the command line or in a query; ValueError with a
    message a user can act on when it is not a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of requests/s") from None
    if not 0 < value < float("inf"):
        raise ValueError(f"{text} req/s: give a rate above 0")
    return value


def best_answer(summary: Summary, fmt: str = "cli", max_itl_p99: float | None = None,
                max_ttft_p99: float | None = None, prefer: str = "throughput") -> BestAnswer:
    spec = summary.spec
    pick = pick_best(summary.records, spec.objectives,
                     limits_for(spec.slo.limits(), max_itl_p99, max_ttft_p99), prefer,
                     lossless_first=not spec.space.lossy)
    if pick.best is None and pick.closest is None:
        return BestAnswer("", False, f"study {summary.name} has no measured trial yet "
                                     f"({describe_counts(summary.records)})")
    chosen = pick.best or pick.closest
    doc = trial_document(spec, chosen, changed_flags(chosen.flags, summary.space.defaults),
                         gains(chosen, default_baseline(summary.records), spec.objectives))
    doc.update({"meets_limits": pick.best is not None, "limits": dict(pick.limits),
                "prefer": prefer, "ranked_by": pick.metric, **accuracy_doc(chosen)})
    limits = ", ".join(f"{k} <= {v:g}" for k, v in pick.limits.items()) or "no limits"
    about = (f"trial {chosen.number}: {pick.metric} {chosen.metric(pick.metric):,.1f}; "
             f"gain over default {format_gains(doc['gain_over_default_pct'])}; "
             f"limits: {limits}")
    ok = pick.best is not None
    if not ok:
        about = "closest trial, does NOT meet the limits: " + about
    if accuracy_line(chosen):  # shown wherever the line about the trial is
        about += "; " + accuracy_line(chosen)
    capped = looser_than_slo(spec.slo.limits(), max_itl_p99, max_ttft_p99)
    if capped:
        doc["limits_note"] = "; ".join(capped)
        about += "; " + doc["limits_note"]
    text = _render(fmt, doc, about, spec, chosen, ok)
    if ok:
        return BestAnswer(text, True, None, about)
    over = ", ".join(_over(chosen, k, pick.limits) for k in pick.excess)
    why = _ruled_out(summary, max_itl_p99, max_ttft_p99)
    return BestAnswer(text, False, f"no measured trial of study {summary.name} meets "
                                   f"{limits}{why}; the closest is trial {chosen.number} "
                                   f"({over})", about)


def _ruled_out(summary: Summary, max_itl_p99: float | None,
               max_ttft_p99: float | None) -> str:
    """'' or ': trials 4, 9 meet p99_itl_ms <= 25 but the study's SLO p99_ttft_ms <= 10000
    rules them out (20,212.0)': which of the study's own SLOs leaves nothing."""
    own = user_limits(max_itl_p99, max_ttft_p99)
    if not own:  # the study's SLOs alone leave nothing: the line says so already
        return ""
    slo = summary.spec.slo.limits()
    parts = []
    for metric, trials in ruled_out(summary.records, own, slo).items():
        values = ", ".join(f"{t.metric(metric) or 0:,.1f}" for t in trials)
        parts.append(f"trial{'s' if len(trials) > 1 else ''} "
                     f"{', '.join(str(t.number) for t in trials)} meet"
                     f"{'' if len(trials) > 1 else 's'} "
                     f"{', '.join(f'{k} <= {v:g}' for k, v in own.items())} but the study's "
                     f"SLO {metric} <= {slo[metric]:g} rules "
                     f"{'them' if len(trials) > 1 else 'it'} out ({values})")
    return (": " + "; ".join(parts)) if parts else ""


def _over(chosen, key: str, limits) -> str:
    if key == ACCURACY:
        return accuracy_line(chosen) or "below the accuracy limit"
    return f"{key} {chosen.metric(key) or 0:,.1f} > {limits[key]:g}"


def _render(fmt: str, doc: dict, about: str, spec, chosen, ok: bool) -> str:
    if fmt == "json":
        return json.dumps(doc, indent=2, sort_keys=False) + "\n"
    if fmt == "yaml":
        head = [f"tuner best, study {spec.name}", about]
        text = config_yaml(spec, chosen.flags, head if ok else [])
        if not ok:
            text = "".join(f"# {line}\n" for line in [*head, *text.splitlines()])
        return text
    line = shell_line(serve_argv(spec, chosen.flags))
    return f"{line}\n" if ok else f"# {about}\n# {line}\n"


def capacity_answer(summary: Summary, fmt: str = "cli", max_itl_p99: float | None = None,
                    max_ttft_p99: float | None = None,
                    rate: float | None = None) -> BestAnswer:
    """`tuner best` for a study whose trials measured load ladders: the most capacity
    within the limits (the study's SLOs where a limit is not given), or with ``rate`` the
    lowest p99 ITL at that request rate among the trials whose capacity reaches it; from
    the stored curves and the SLO's one verdict (``tuner.results.capacity``), never
    extrapolated. The answer names the capacity's interval, or says there is none."""
    spec = summary.spec
    limits_ms = {**spec.slo.limits(), **user_limits(max_itl_p99, max_ttft_p99)}
    slo = capacity.slo_at(limits_ms, spec.capacity.tolerance)
    limits = ", ".join(f"{k} <= {v:g} ms" for k, v in slo.limits) or "no limits"
    edge = capacity.highest_measured(summary.records)
    if edge is None:
        return BestAnswer("", False, f"study {summary.name} has no measured load ladder yet "
                                     f"({describe_counts(summary.records)})")
    if rate is not None:
        if rate > edge:
            return BestAnswer("", False, f"{rate:g} req/s is above the highest measured "
                                         f"level ({edge:.3g} req/s): tuner best does not "
                                         "extrapolate")
        found = capacity.lowest_latency_at(summary.records, rate, slo)
        what = f"at {rate:g} req/s"
    else:
        found = capacity.most_capacity(summary.records, slo)
        what = "capacity"
    if found is None:
        return BestAnswer("", False, f"no trial of study {summary.name} holds {limits} "
                                     f"{'at ' + format(rate, 'g') + ' req/s' if rate else 'at any measured level'}")
    chosen = found.trial
    measured = (f"measured at {found.levels[0]:.3g} req/s" if len(found.levels) == 1 else
                f"between the levels measured at {found.levels[0]:.3g} and "
                f"{found.levels[1]:.3g} req/s")
    tput = (f", {found.output_throughput:,.0f} tok/s"
            if found.output_throughput is not None else "")
    head = what if rate is not None else f"{what} {found.rate:.3g} req/s"
    about = (f"trial {chosen.number}: {head} {interval_text(found)} with p99 ITL "
             f"{_ms(found.p99_itl_ms, '{:,.1f}')} ms, p99 TTFT "
             f"{_ms(found.p99_ttft_ms, '{:,.0f}')} ms{tput} ({measured}); limits: {limits}")
    est = found.estimate
    doc = trial_document(spec, chosen, changed_flags(chosen.flags, summary.space.defaults),
                         gains(chosen, default_baseline(summary.records), spec.objectives))
    doc.update({"meets_limits": True, "answer": {
        "rate_rps": found.rate, "p99_itl_ms": found.p99_itl_ms,
        "p99_ttft_ms": found.p99_ttft_ms, "output_throughput": found.output_throughput,
        "measured_levels_rps": list(found.levels), "reference": what,
        "capacity_rps": None if est is None else est.point,
        "capacity_rps_lower": None if est is None else est.lower,
        "capacity_rps_upper": None if est is None else est.upper,
        "capacity_censored": None if est is None else est.censored,
        "at_the_limit": found.at_the_limit,
        "limits": dict(slo.limits)}})
    return BestAnswer(_render(fmt, doc, about, spec, chosen, True), True, None, about)


def interval_text(found: capacity.CapacityAnswer) -> str:
    """"(capacity 95 % interval 3.2-3.9 req/s)", with "at least" when censored, "at the
    limit" for a rate inside it, or "(no interval: stored before intervals)"."""
    est = found.estimate
    if est is None or est.lower is None:
        return "(no interval: the trial was stored before capacity intervals)"
    span = f"capacity 95 % interval {est.lower:.3g}-{est.upper:.3g} req/s"
    if est.censored:
        span += f", censored: at least {est.point:.3g} (every level held)"
    if found.at_the_limit and found.rate != est.point:
        span += "; at the limit"
    return f"({span})"


def _ms(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)
