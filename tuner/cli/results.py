"""`tuner pareto STUDY`, `tuner best STUDY`, `tuner report STUDY -o FILE`.

All three only read the study (one query for its trials), so they can run at any time,
also while workers are running it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tuner.cli.study import add_storage_flag
from tuner.errors import UsageError
from tuner.results import load_records, pick_best, summarise
from tuner.results.best import Pick, limits_for
from tuner.results.flagdiff import changed_flags
from tuner.results.gains import format_gains, gains
from tuner.results.errors import NoResultsError
from tuner.results.records import default_baseline, describe_counts
from tuner.results.serve import config_yaml, serve_argv, trial_document
from tuner.results.summary import Summary
from tuner.results.table import pareto_text
from tuner.space import shell_line
from tuner.study import open_study, resolve_url


def _positive_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of milliseconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} ms: give a limit above 0")
    return value


def register(subparsers) -> None:
    p = subparsers.add_parser("pareto", help="the Pareto-optimal trials of a study")
    p.add_argument("study", help="study name")
    add_storage_flag(p)
    p.set_defaults(func=_pareto)

    b = subparsers.add_parser("best", help="the best flags under limits, ready to serve")
    b.add_argument("study", help="study name")
    add_storage_flag(b)
    b.add_argument("--max-itl-p99", type=_positive_ms, metavar="MS",
                   help="p99 inter-token latency limit, on top of the study's SLOs")
    b.add_argument("--max-ttft-p99", type=_positive_ms, metavar="MS",
                   help="p99 time-to-first-token limit, on top of the study's SLOs")
    b.add_argument("--prefer", choices=("throughput", "latency"), default="throughput",
                   help="the objective to win on (default: throughput)")
    b.add_argument("--format", choices=("cli", "yaml", "json"), default="cli",
                   help="cli: a `vllm serve` line; yaml: a file for `vllm serve --config`; "
                        "json: everything, for scripts")
    b.set_defaults(func=_best)

    r = subparsers.add_parser("report", help="write an HTML report of a study")
    r.add_argument("study", help="study name")
    add_storage_flag(r)
    r.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the HTML file to write (PNG figures go beside it)")
    r.set_defaults(func=_report)


def load_summary(name: str, storage: str | None) -> Summary:
    opened = open_study(name, resolve_url(storage))
    return summarise(opened.spec, opened.space, load_records(opened.study))


def _pareto(args: argparse.Namespace) -> int:
    summary = load_summary(args.study, args.storage)
    if not summary.front:
        raise NoResultsError(f"study {summary.name} has no measured trial that meets its "
                             f"SLOs yet ({summary.counts_line})")
    print(pareto_text(summary))
    return 0


def _limits_text(pick: Pick) -> str:
    return ", ".join(f"{k} <= {v:g}" for k, v in pick.limits.items()) or "no limits"


def _best(args: argparse.Namespace) -> int:
    summary = load_summary(args.study, args.storage)
    spec = summary.spec
    limits = limits_for(spec.slo.limits(), args.max_itl_p99, args.max_ttft_p99)
    pick = pick_best(summary.records, spec.objectives, limits, args.prefer)
    if pick.best is None and pick.closest is None:
        raise NoResultsError(f"study {summary.name} has no measured trial yet "
                             f"({describe_counts(summary.records)})")
    chosen = pick.best or pick.closest
    default = default_baseline(summary.records)
    doc = trial_document(spec, chosen, changed_flags(chosen.flags, summary.space.defaults),
                         gains(chosen, default, spec.objectives))
    doc.update({"meets_limits": pick.best is not None, "limits": dict(pick.limits),
                "prefer": args.prefer, "ranked_by": pick.metric})
    about = (f"trial {chosen.number}: {pick.metric} {chosen.metric(pick.metric):,.1f}; "
             f"gain over default {format_gains(doc['gain_over_default_pct'])}; "
             f"limits: {_limits_text(pick)}")
    if pick.best is None:
        about = "closest trial, does NOT meet the limits: " + about
    _emit(args.format, doc, about, spec, chosen, pick.best is not None)
    if pick.best is None:
        over = ", ".join(f"{k} {chosen.metric(k) or 0:,.1f} > {pick.limits[k]:g}"
                         for k in pick.excess)
        raise NoResultsError(f"no measured trial of study {summary.name} meets "
                             f"{_limits_text(pick)}; the closest is trial {chosen.number} "
                             f"({over}), shown on stdout")
    return 0


def _emit(fmt: str, doc: dict, about: str, spec, chosen, ok: bool) -> None:
    if fmt == "json":
        print(json.dumps(doc, indent=2, sort_keys=False))
        return
    if fmt == "yaml":
        head = [f"tuner best, study {spec.name}", about]
        text = config_yaml(spec, chosen.flags, head if ok else [])
        if not ok:  # never a ready-to-use file for a trial that misses the limits
            text = "".join(f"# {line}\n" for line in [*head, *text.splitlines()])
        print(text, end="")
        return
    line = shell_line(serve_argv(spec, chosen.flags))
    if ok:
        print(f"# {about}", file=sys.stderr)
        print(line)
    else:
        print(f"# {about}\n# {line}")


def _report(args: argparse.Namespace) -> int:
    from tuner.results.report import write_report  # matplotlib only when needed

    out = Path(args.output)
    if out.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"{out}: the report is an HTML file; give a name ending in .html")
    summary = load_summary(args.study, args.storage)
    print(f"tuner: writing the report of study {summary.name} ({summary.counts_line})",
          file=sys.stderr)
    written = write_report(summary, out)
    for path in written:
        print(path)
    return 0
