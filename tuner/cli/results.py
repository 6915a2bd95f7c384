"""`tuner pareto STUDY`, `tuner best STUDY`, `tuner report STUDY -o FILE`.

All three only read the study (one query for its trials), so they can run at any time,
also while workers are running it.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from tuner.cli.study import add_storage_flag
from tuner.errors import UsageError
from tuner.results import summarise
from tuner.results.answer import answer, rate_of
from tuner.results.errors import NoResultsError
from tuner.results.summary import Summary
from tuner.results.table import pareto_text
from tuner.storage import open_study, resolve_url
from tuner.trials import load_records

log = logging.getLogger(__name__)


def _positive_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of milliseconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} ms: give a limit above 0")
    return value


def _positive_rate(text: str) -> float:
    try:
        return rate_of(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


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
    b.add_argument("--rate", type=_positive_rate, metavar="REQ_PER_S",
                   help="a capacity study: the lowest p99 ITL at this request rate, from "
                        "the measured curves (never past the highest measured level)")
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


def _best(args: argparse.Namespace) -> int:
    summary = load_summary(args.study, args.storage)
    said = answer(summary, args.format, args.max_itl_p99, args.max_ttft_p99, args.prefer,
                  args.rate)
    if not said.text:
        raise NoResultsError(said.error)
    if said.ok and args.format == "cli":
        log.info("# %s", said.about)
    print(said.text, end="")
    if not said.ok:
        raise NoResultsError(f"{said.error}, shown on stdout")
    return 0


def _report(args: argparse.Namespace) -> int:
    from tuner.results.report import write_report  # matplotlib only when needed

    out = Path(args.output)
    if out.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"{out}: the report is an HTML file; give a name ending in .html")
    summary = load_summary(args.study, args.storage)
    log.info("tuner: writing the report of study %s (%s)", summary.name, summary.counts_line)
    written = write_report(summary, out)
    for path in written:
        print(path)
    return 0
