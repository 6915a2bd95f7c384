"""`tuner worker STUDY --gpus 0[,1...]`: run trials of a stored study on these GPUs."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys

from tuner.cli.study import add_storage_flag
from tuner.spec.durations import parse_duration
from tuner.errors import UsageError
from tuner.runner import Worker
from tuner.engine.gpu import parse_gpus
from tuner.engine.trust import EngineTrust
from tuner.storage import resolve_url

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser("worker", help="run a study's trials on some GPUs")
    p.add_argument("study", metavar="STUDY", help="the stored study's name")
    add_storage_flag(p)
    p.add_argument("--gpus", default="0", help="GPU ids this worker owns, e.g. 0 or 0,1")
    p.add_argument("--n-trials", type=int,
                   help="stop once this worker has spent this many trials of the study's "
                        "budget (counted as the budget is: docs/studies.md, n_trials)")
    p.add_argument("--timeout", help="stop starting trials after this long, e.g. 2h")
    add_trust_flags(p)
    p.set_defaults(func=_run)


def add_trust_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine-python", metavar="PATH",
                   help="the Python that runs vLLM here (allowed as engine.python; default "
                        "$TUNER_ENGINE_PYTHON, else python3; more in $TUNER_ALLOWED_ENGINES)")
    p.add_argument("--trust-stored-engine", action="store_true",
                   help="run whatever program and environment the stored study names "
                        "(only for a database that only trusted people can write)")


def run_worker(study: str, url: str, gpus: tuple[int, ...], n_trials: int | None,
               timeout_s: float | None, trust: EngineTrust | None = None) -> int:
    worker = Worker.open(study, url, gpus, n_trials=n_trials, timeout_s=timeout_s,
                         trust=trust)
    _stacks_on_sigusr1()
    summary = worker.run()
    told = ", ".join(f"{v} {k}" for k, v in sorted(summary.told.items())) or "no trials"
    log.info("worker done: %s; %s", told, summary.reason)
    return 130 if summary.reason == "interrupted" else 0


def _stacks_on_sigusr1() -> None:
    """A worker that seems stuck says where: `kill -USR1 PID` writes every thread's stack to
    the process's standard error (the worker's log) and the worker goes on. Not where that
    stream has no file descriptor (a worker run inside another program, as tests do)."""
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    except (AttributeError, ValueError, OSError):
        log.debug("no stack dump on SIGUSR1: standard error has no file descriptor")


def _run(args: argparse.Namespace) -> int:
    if args.n_trials is not None and args.n_trials < 1:
        raise UsageError("--n-trials must be at least 1")
    timeout = parse_duration(args.timeout) if args.timeout else None
    trust = EngineTrust.from_settings(args.engine_python, args.trust_stored_engine)
    return run_worker(args.study, resolve_url(args.storage), parse_gpus(args.gpus),
                      args.n_trials, timeout, trust)
