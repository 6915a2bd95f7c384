"""`tuner launch STUDY --gpus ...`, `tuner status STUDY [--once]`, `tuner stop STUDY [--now]`."""

from __future__ import annotations

import argparse
import logging
import sys
import time

from tuner.cli.study import add_storage_flag, again, storage_source
from tuner.cli.worker import add_trust_flags
from tuner.spec.durations import parse_duration
from tuner.errors import TunerError
from tuner.service import launch, read_status, render_status, stop
from tuner.storage import mask, resolve_url
from tuner.engine.trust import EngineTrust
from tuner.storage.database import storage_env

log = logging.getLogger(__name__)

REFRESH_S = 2.0


def register(subparsers) -> None:
    p = subparsers.add_parser("launch", help="start a study's workers in the background, "
                                             "one per GPU group")
    p.add_argument("study", metavar="STUDY", help="the stored study's name")
    add_storage_flag(p)
    p.add_argument("--gpus", required=True,
                   help="'all' (needs nvidia-smi) or GPU ids, e.g. 0,1,2,3")
    add_trust_flags(p)
    p.set_defaults(func=_launch)

    s = subparsers.add_parser("status", help="workers, trials, best so far, time left")
    s.add_argument("study", metavar="STUDY", help="the stored study's name")
    add_storage_flag(s)
    s.add_argument("--once", action="store_true", help="print one snapshot and exit")
    s.add_argument("--json", action="store_true", help="one snapshot as JSON")
    s.set_defaults(func=_status)

    t = subparsers.add_parser("stop", help="stop a study's workers (running trials finish)")
    t.add_argument("study", metavar="STUDY", help="the stored study's name")
    add_storage_flag(t)
    t.add_argument("--now", action="store_true",
                   help="stop running trials at once (recorded as stopped, queued again)")
    t.add_argument("--timeout", help="give up waiting after this long, e.g. 30m")
    t.set_defaults(func=_stop)


def _launch(args: argparse.Namespace) -> int:
    url = resolve_url(args.storage)
    trust = EngineTrust.from_settings(args.engine_python, args.trust_stored_engine)
    launched = launch(args.study, url, args.gpus, storage_env(args.storage, url), trust)
    for w in launched:
        print(f"worker on GPU {','.join(map(str, w.gpus))}: pid {w.pid}, log {w.log}")
    log.info(f"study {args.study} ({mask(url)}): {len(launched)} worker(s) running; "
             f"{again(f'tuner status {args.study}', args.storage, url)} to watch, "
             f"{again(f'tuner stop {args.study}', args.storage, url)} to stop")
    return 0


def _status(args: argparse.Namespace) -> int:
    url = resolve_url(args.storage)
    if args.json:
        import json

        print(json.dumps({**read_status(args.study, url).as_json(), "storage": mask(url)},
                         indent=2))
        return 0
    where = f"storage: {mask(url)} (from {storage_source(args.storage)})\n"

    def render(st) -> str:
        return render_status(st, lambda command: again(command, args.storage, url))

    if args.once or not sys.stdout.isatty():
        try:
            print(where + render(read_status(args.study, url)), flush=True)
        except BrokenPipeError:  # `tuner status S | head`
            sys.stdout = None
        return 0
    try:
        while True:  # a live view until Ctrl-C
            text = where + render(read_status(args.study, url))
            sys.stdout.write("\x1b[H\x1b[2J" + text + f"\n\n(every {REFRESH_S:g} s; "
                             "Ctrl-C to leave)\n")
            sys.stdout.flush()
            time.sleep(REFRESH_S)
    except KeyboardInterrupt:
        print()
        return 0


def _stop(args: argparse.Namespace) -> int:
    url = resolve_url(args.storage)
    timeout = parse_duration(args.timeout) if args.timeout else None
    left = stop(args.study, url, now=args.now, timeout_s=timeout,
                say=lambda line: log.info("tuner: %s", line))
    if left:
        raise TunerError(f"{len(left)} worker(s) still running after {args.timeout}: "
                         + ", ".join(w.id for w in left))
    print(f"study {args.study}: no worker running")
    return 0
