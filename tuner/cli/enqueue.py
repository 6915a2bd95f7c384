"""`tuner enqueue STUDY --baseline NAME`: queue a baseline again (vLLM's defaults, ...)."""

from __future__ import annotations

import argparse

from tuner.cli.study import add_storage_flag, again
from tuner.search.warm import queue_baseline
from tuner.storage import mask, open_study, resolve_url
from tuner.trials import load_records


def register(subparsers) -> None:
    p = subparsers.add_parser("enqueue", help="queue a baseline again (e.g. vLLM's defaults "
                                              "after a run that failed)")
    p.add_argument("study", metavar="STUDY", help="the stored study's name")
    p.add_argument("--baseline", required=True, metavar="NAME",
                   help="the baseline to queue: default (vLLM's defaults with the study's "
                        "fixed flags), article or article-chunked")
    add_storage_flag(p)
    p.set_defaults(func=_enqueue)


def _enqueue(args: argparse.Namespace) -> int:
    url = resolve_url(args.storage)
    opened = open_study(args.study, url)
    pending = [r for r in load_records(opened.study)
               if r.baseline == args.baseline and not r.told]
    if pending:
        print(f"study {args.study}: the {args.baseline} baseline is {pending[0].state} "
              f"already (trial {pending[0].number}); nothing queued")
        return 0
    b = queue_baseline(opened.study, opened.space, args.baseline)
    print(f"study {args.study} ({mask(url)}): queued the {b.name} baseline ({b.description}); "
          f"the next worker runs it first: "
          f"{again(f'tuner worker {args.study}', args.storage, url)}")
    return 0
