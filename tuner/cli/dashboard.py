"""`tuner dashboard [STUDY] [--storage URL] [--host 127.0.0.1] [--port 8080]
[--unsafe-remote] [--allow-host NAME]`.

The dashboard has no login: it binds a loopback address unless ``--unsafe-remote`` says
otherwise, and serves read-only (``tuner.results.readonly``)."""

from __future__ import annotations

import argparse
import logging

import optuna

from tuner import optuna_adapter
from tuner.cli.study import add_storage_flag
from tuner.errors import UsageError
from tuner.storage import mask, open_storage, open_study, resolve_url
from tuner.storage.studies import SPEC

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "dashboard", help="serve optuna-dashboard on a storage, with tuner's figures")
    p.add_argument("study", nargs="?", help="a study to prepare the figures of (default: "
                                            "every tuner study in the storage)")
    add_storage_flag(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--unsafe-remote", action="store_true",
                   help="allow a --host that is not loopback (UNSAFE: the dashboard has no "
                        "login, and everyone who reaches the port reads every study; "
                        "docs/deploy.md)")
    add_allow_host_flag(p)
    p.set_defaults(func=_dashboard)


def add_allow_host_flag(parser: argparse.ArgumentParser) -> None:
    """``--allow-host NAME`` (repeatable): the dashboard's and the API's ``Host`` check."""
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="also answer requests whose Host header is NAME (the name a "
                             "browser or client uses for this box; loopback names are "
                             "always answered)")


def _say(text: str) -> None:
    log.info(text)


def _dashboard(args: argparse.Namespace) -> int:
    from tuner.results.dashboard import publish, serve
    from tuner.results.readonly import is_loopback

    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: give a port between 1 and 65535")
    if not is_loopback(args.host) and not args.unsafe_remote:
        raise UsageError(f"--host {args.host}: the dashboard has no login; bind a loopback "
                         "address and reach it through SSH (docs/deploy.md), or add "
                         "--unsafe-remote")
    url = resolve_url(args.storage)
    storage = open_storage(url, create=False)  # reading: never leave an empty database
    if args.study:
        names = [args.study]
    else:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)
                 if SPEC in s.user_attrs]
    path = "/dashboard/"
    for name in names:
        opened = open_study(name, url)
        publish(opened, _say)
        if args.study:
            path = f"/dashboard/studies/{optuna_adapter.study_id(opened.study)}"
    host = f"[{args.host}]" if ":" in args.host else args.host
    _say(f"tuner: optuna-dashboard on {mask(url)} at http://{host}:{args.port}{path} "
         "(Ctrl-C stops it)")
    serve(storage, args.host, args.port, args.allow_host)
    return 0
