"""`tuner api [--host 127.0.0.1] [--port N] [--token-file FILE] [--allow-host NAME]`: the
read-only HTTP API over a storage."""

from __future__ import annotations

import argparse
import errno
import logging
from pathlib import Path

from tuner.cli.dashboard import add_allow_host_flag
from tuner.cli.study import add_storage_flag
from tuner.errors import UsageError
from tuner.settings import settings
from tuner.storage import mask, resolve_url

log = logging.getLogger(__name__)

DEFAULT_PORT = 8470
MIN_TOKEN_CHARS = 16  # a shared secret: one guessed in a few tries guards nothing


def register(subparsers) -> None:
    p = subparsers.add_parser("api", help="serve studies read-only over HTTP (JSON)")
    add_storage_flag(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; others need a token)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument("--token-file", metavar="FILE",
                   help="a file holding the bearer token (else $TUNER_API_TOKEN)")
    add_allow_host_flag(p)
    p.set_defaults(func=_run)


def read_token(path: str | None) -> str | None:
    """The bearer token from ``path`` (else ``TUNER_API_TOKEN``), or None; UsageError for a
    file that cannot be read, is empty, or a token shorter than ``MIN_TOKEN_CHARS``."""
    if path:
        try:
            token = Path(path).read_text().strip()
        except OSError as e:
            raise UsageError(f"cannot read the token file {path}: {e.strerror}") from e
        if not token:
            raise UsageError(f"the token file {path} is empty")
        return _long_enough(token, f"--token-file {path}")
    token = settings().api_token
    return None if token is None else _long_enough(token, "TUNER_API_TOKEN")


def _long_enough(token: str, source: str) -> str:
    if len(token) < MIN_TOKEN_CHARS:
        n = len(token)
        raise UsageError(f"{source}: the token is {n} character{'s' * (n != 1)} long; give one "
                         f"of at least {MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 32`'s output)")
    return token


def _run(args: argparse.Namespace) -> int:
    from aiohttp import web

    from tuner.service.api import IDLE_TIMEOUT_S, check_exposure, make_app

    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: give a port between 1 and 65535")
    token = read_token(args.token_file)
    check_exposure(args.host, token)
    url = resolve_url(args.storage)
    app = make_app(url, token, args.allow_host)
    auth = "bearer token required" if token else "no token"
    banner = f"tuner api on http://{args.host}:{args.port} over {mask(url)} (read-only, {auth})"
    try:  # aiohttp prints once it listens: the banner then, never before a failed bind
        web.run_app(app, host=args.host, port=args.port, access_log=None,
                    keepalive_timeout=IDLE_TIMEOUT_S, print=lambda _: log.info(banner))
    except OSError as e:
        why = "is in use" if e.errno == errno.EADDRINUSE else f"cannot be used ({e.strerror})"
        raise UsageError(f"port {args.port} on {args.host} {why}; choose another --port") \
            from e
    return 0
