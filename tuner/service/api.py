"""The read-only HTTP API (aiohttp): studies, their status, Pareto front and best flags.

    GET /studies                     every study with its progress
    GET /studies/{name}              the study's status (as `tuner status --json`)
    GET /studies/{name}/pareto       the Pareto-optimal trials (each with lossy_flags and
                                     the accuracy guard's figures), and the lossy trials
                                     below the accuracy limit (below_accuracy_limit)
    GET /studies/{name}/best         `tuner best`'s output; query: format=cli|yaml|json,
                                     max_itl_p99, max_ttft_p99, prefer=throughput|latency,
                                     rate (requests/s; a capacity study only)

Errors are JSON ``{"error": "..."}``: 400 for a bad query (a ``rate`` on a study that
measures no load ladder included), 401 without the right bearer token (when one is
configured), 403 for a ``Host`` header that does not name this machine (the dashboard's
check, ``tuner.results.readonly.host_check``: a web page on a name that its DNS points at
127.0.0.1, DNS rebinding, reads nothing), 404 for an unknown study or route, 422 when no
trial meets the limits (with ``output``: what `tuner best` prints for the closest trial),
503 when the storage cannot be read, and 500 with one line for anything else (the
traceback goes to the API's log); ``GET /studies`` leaves out, and logs, a study it cannot
read, so one bad study never hides the others. A trial whose stored record does not read
back is left out of every answer (``tuner.trials.queries.readable``), with a warning in
the log. Every database read runs in a thread
(``asyncio.to_thread``), so the event loop keeps answering while it waits. A connection
that sends no whole request within ``IDLE_TIMEOUT_S`` is closed (slowloris).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Collection
from typing import Any

import optuna
from aiohttp import web

from tuner.errors import StorageError, UsageError
from tuner.results import summarise
from tuner.results.answer import answer, rate_of
from tuner.results.lossy import accuracy_doc, accurate
from tuner.results.readonly import host_check, is_loopback, wrong_host
from tuner.service import status
from tuner.space import build_space
from tuner.storage import open_storage
from tuner.storage.database import heartbeat_s
from tuner.storage.load import spec_from_json
from tuner.spec.study import is_study_name
from tuner.storage.studies import SPEC, stored_engine
from tuner.trials import load_records

log = logging.getLogger(__name__)

# A connection that has not sent a whole request head within this many seconds of opening,
# or of its last answer, is closed: aiohttp's keep-alive timer (web.run_app's
# keepalive_timeout), which runs before the first request too since aiohttp 3.14.5. A
# request's unread body is drained for aiohttp's lingering_time at most, then dropped.
IDLE_TIMEOUT_S = 15.0

READER = web.AppKey("reader", object)
TOKEN = web.AppKey("token", object)
HOST_OK = web.AppKey("host_ok", object)


class StudyMissing(Exception):
    pass


class Reader:
    """Blocking reads over one storage (one connection pool for the whole service)."""

    def __init__(self, url: str) -> None:
        self.storage = open_storage(url, create=False)
        self._specs: dict[str, Any] = {}

    def _load(self, name: str) -> tuple[optuna.Study, Any, Any]:
        if not is_study_name(name):  # a NUL, a slash: no study has such a name
            raise StudyMissing(f"no study {name!r}")
        try:
            study = optuna.load_study(study_name=name, storage=self.storage)
        except KeyError:
            raise StudyMissing(f"no study {name!r}") from None
        if name not in self._specs:
            attrs = study.user_attrs
            if SPEC not in attrs:
                raise StudyMissing(f"study {name!r} was not created by tuner")
            try:
                spec = spec_from_json(attrs[SPEC], name)
            except UsageError as e:  # a stored definition this version cannot read
                raise StudyMissing(str(e)) from e
            self._specs[name] = (spec, build_space(spec, stored_engine(study)))
        spec, space = self._specs[name]
        return study, spec, space

    def names(self) -> list[str]:
        return [s.study_name for s in optuna.get_all_study_summaries(
            self.storage, include_best_trial=False)]

    def status(self, name: str) -> dict[str, Any]:
        study, spec, _ = self._load(name)
        trials = study.get_trials(deepcopy=False)
        attrs = study.user_attrs
        return status.build(spec, trials, attrs, time.time(), heartbeat_s()).as_json()

    def summary(self, name: str):
        study, spec, space = self._load(name)
        return summarise(spec, space, load_records(study))


def _error(code: int, message: str, **extra: Any) -> web.Response:
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
    return web.json_response({"error": message, **extra}, status=code, headers=headers)


async def _read(request: web.Request, method: str, *args: Any):
    reader = request.app[READER]
    return await asyncio.to_thread(getattr(reader, method), *args)


@web.middleware
async def _guard(request: web.Request, handler):
    if not request.app[HOST_OK](request.headers.get("Host")):
        return _error(403, wrong_host("tuner api"))
    token = request.app[TOKEN]
    if token:
        given = request.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(),
                                                                 token.encode()):
            return _error(401, "a valid bearer token is required (Authorization: Bearer ...)")
    try:
        return await handler(request)
    except StudyMissing as e:
        return _error(404, str(e))
    except web.HTTPNotFound:
        return _error(404, f"no such resource: {request.path}")
    except web.HTTPMethodNotAllowed:
        return _error(405, f"{request.method} is not allowed: the API is read-only")
    except (StorageError, optuna.exceptions.StorageInternalError, OSError) as e:
        return _error(503, f"cannot read the storage: {_line(e)}")
    except web.HTTPException:
        raise
    except Exception as e:  # a bug, or stored data no check foresaw: one line, not a page
        log.exception("GET %s failed", request.path)
        return _error(500, f"internal error ({type(e).__name__}: {_line(e)}); "
                           "the API's log has the traceback")


def _line(e: BaseException) -> str:
    """The error's first line, at most 200 characters."""
    lines = str(e).splitlines()
    return lines[0][:200] if lines else ""


async def studies(request: web.Request) -> web.Response:
    out = []
    for name in await _read(request, "names"):
        try:
            st = await _read(request, "status", name)
        except StudyMissing:
            continue
        except (StorageError, optuna.exceptions.StorageInternalError, OSError):
            raise  # the storage, not this study: answered 503 for the whole list
        except Exception:  # this study alone cannot be read: list the others
            log.exception("GET /studies: leaving out study %r, which cannot be read", name)
            continue
        out.append({k: st[k] for k in ("study", "engine", "budget", "counted", "counts",
                                       "live_workers", "front_size", "eta_s",
                                       "stop_requested")})
    return web.json_response({"studies": out})


async def study(request: web.Request) -> web.Response:
    return web.json_response(await _read(request, "status", request.match_info["name"]))


async def pareto(request: web.Request) -> web.Response:
    s = await _read(request, "summary", request.match_info["name"])
    rows = [{"trial": r.record.number, "baseline": r.record.baseline,
             "values": list(r.record.values or ()), "metrics": dict(r.record.metrics),
             "flags": dict(r.record.flags), "changed_flags": dict(r.changed),
             "gain_over_default_pct": dict(r.gains), "slos_met": r.slos_met,
             **accuracy_doc(r.record)}
            for r in s.front]
    refused = [{"trial": r.number, "flags": dict(r.flags), **accuracy_doc(r)}
               for r in s.records if r.measured and not accurate(r)]
    return web.json_response({"study": s.name, "objectives": [
        o.model_dump() for o in s.spec.objectives], "front": rows,
        "min_token_agreement": s.spec.accuracy_limit, "below_accuracy_limit": refused})


def _limit(query, key: str) -> float | None:
    if key not in query:
        return None
    try:
        value = float(query[key])
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise web.HTTPBadRequest(text=f"{key}: give a number of milliseconds above 0")
    return value


async def best(request: web.Request) -> web.Response:
    q = request.query
    fmt, prefer = q.get("format", "cli"), q.get("prefer", "throughput")
    if fmt not in ("cli", "yaml", "json"):
        return _error(400, "format: one of cli, yaml, json")
    if prefer not in ("throughput", "latency"):
        return _error(400, "prefer: one of throughput, latency")
    try:
        itl, ttft = _limit(q, "max_itl_p99"), _limit(q, "max_ttft_p99")
        rate = rate_of(q["rate"]) if "rate" in q else None
    except web.HTTPBadRequest as e:
        return _error(400, e.text or "bad query")
    except ValueError as e:
        return _error(400, f"rate: {e}")
    s = await _read(request, "summary", request.match_info["name"])
    try:
        said = answer(s, fmt, itl, ttft, prefer, rate)
    except UsageError as e:
        return _error(400, str(e))
    if not said.ok:
        return _error(404 if not said.text else 422, said.error or "",
                      **({"output": said.text} if said.text else {}))
    if fmt == "json":
        return web.Response(text=said.text, content_type="application/json")
    return web.Response(text=said.text, content_type="text/plain")


def make_app(storage_url: str, token: str | None = None,
             extra_hosts: Collection[str] = ()) -> web.Application:
    """The API over ``storage_url``; requests need ``token`` (when given) and a ``Host``
    that is a loopback name or one of ``extra_hosts``."""
    app = web.Application(middlewares=[_guard])
    app[READER] = Reader(storage_url)
    app[TOKEN] = token or None
    app[HOST_OK] = host_check(extra_hosts)
    app.router.add_get("/studies", studies)
    app.router.add_get("/studies/{name}", study)
    app.router.add_get("/studies/{name}/pareto", pareto)
    app.router.add_get("/studies/{name}/best", best)
    return app


def check_exposure(host: str, token: str | None) -> None:
    """Listening beyond loopback needs a token: UsageError otherwise."""
    if not token and not is_loopback(host):
        raise UsageError(f"refusing to listen on {host} without a token: set "
                         "TUNER_API_TOKEN or --token-file, or listen on 127.0.0.1")
