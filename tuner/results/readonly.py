"""The dashboard's guard: a WSGI middleware in front of optuna-dashboard's app; its
``Host`` check (``host_check``) is the API's too (``tuner.service.api``).

optuna-dashboard (0.21) has no login and no read-only mode: over HTTP it deletes, renames
and creates studies, tells trials, rewrites trial user attributes (a queued baseline's
launch among them), writes notes and upgrades the database schema. ``read_only`` lets
through only ``GET`` and ``HEAD`` (none of its GET routes writes the storage) and answers
``405`` to every other method; tuner's own figures and notes are written through the
Python API before serving, never over HTTP.

It also answers ``403`` to a request whose ``Host`` header does not name this machine
(``localhost`` or a loopback address, any port; or a name in ``extra_hosts``): a web page
on a name that its DNS points at 127.0.0.1 (DNS rebinding) would otherwise read the
dashboard from the user's browser as its own origin. optuna-dashboard reads the
``Accept-Encoding`` of a request for its static files without a default (a ``500`` to one
that sends none, as scripts and ``curl`` do): the guard gives such a request ``identity``,
which asks for no compression. Pure: no socket here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Collection, Iterable
from typing import Any
from urllib.parse import urlsplit

READ_METHODS = ("GET", "HEAD")

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def is_loopback(host: str) -> bool:
    """``localhost`` or an address of the loopback network (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header, lower case, without port or IPv6 brackets; None when
    it is not a plain ``name[:port]``."""
    try:
        parts = urlsplit("//" + header)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    if parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return parts.hostname


def host_check(extra_hosts: Collection[str] = ()) -> Callable[[str | None], bool]:
    """Whether a ``Host`` header (None: none given) names this machine: ``localhost`` or a
    loopback address, any port, or a name in ``extra_hosts`` (any case)."""
    allowed = frozenset(h.lower() for h in extra_hosts)

    def names_this_machine(header: str | None) -> bool:
        name = host_name(header or "")
        return bool(name) and (is_loopback(name) or name in allowed)

    return names_this_machine


def wrong_host(program: str) -> str:
    """The one line a request gets whose ``Host`` fails ``host_check``."""
    return (f"{program}: this Host is not this machine's loopback name; open "
            "http://127.0.0.1:PORT/ (an SSH tunnel for a remote one), or name the host with "
            "--allow-host NAME")


def _refuse(start_response: Callable[..., Any], status: str, text: str,
            extra: tuple[tuple[str, str], ...] = ()) -> list[bytes]:
    body = (text + "\n").encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(body))), *extra])
    return [body]


def read_only(app: WSGIApp, extra_hosts: Collection[str] = ()) -> WSGIApp:
    """``app`` behind the method and ``Host`` checks (module docstring)."""
    names_this_machine = host_check(extra_hosts)

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]):
        if not names_this_machine(environ.get("HTTP_HOST")):
            return _refuse(start_response, "403 Forbidden", wrong_host("tuner dashboard"))
        if environ.get("REQUEST_METHOD", "GET").upper() not in READ_METHODS:
            return _refuse(start_response, "405 Method Not Allowed",
                           "tuner dashboard is read-only: notes, trials and studies are "
                           "changed with the tuner commands, not here",
                           (("Allow", ", ".join(READ_METHODS)),))
        return app({"HTTP_ACCEPT_ENCODING": "identity", **environ}, start_response)

    return guarded
