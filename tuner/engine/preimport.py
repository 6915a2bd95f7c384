"""Pre-imported starts: fork each trial's server from a process that imported vLLM once.

A plain start spends 22-24 s importing torch and vLLM before the API server logs anything
(docs/starts.md). ``Preimported`` is a ``Spawn`` (``tuner.engine.supervisor``) that
keeps one supervisor per worker slot (``forkserver.py``, run by the engine's own Python)
and asks it to fork the trial's server: the same ``python -m MODULE ARGS``, in its own
process group, with the trial's whole environment and log. It falls back to
``plain_start``, with one log line, whenever the fork cannot be the same start:

- the launch is not ``PYTHON -m MODULE ...`` of the supervisor's Python and module;
- the trial's environment differs from the supervisor's in a name the import read
  (reported by the supervisor) or that a library reads when it loads (``LOAD_TIME``);
- the supervisor cannot be started or answered (a dead one is started again first).

    starter = for_study(spec, slot_logs)          # plain_start or this slot's Preimported
    Server(launch, port, log, starter=starter)
"""

from __future__ import annotations

import atexit
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from tuner.engine.forkclient import ForkedProcess, ForkServer, ForkServerError, as_started, \
    env_refusal, module_launch
from tuner.engine.supervisor import Process, Spawn, plain_start

if TYPE_CHECKING:
    from tuner.spec.study import StudySpec

log = logging.getLogger(__name__)


class Preimported:
    """A ``Spawn`` that forks from this slot's supervisor, else starts plainly; the
    supervisor imports ``also`` too (what the module imports only when it runs)."""

    def __init__(self, folder: Path, also: Sequence[str] = ()) -> None:
        self.folder = Path(folder)
        self.also = tuple(also)
        self.server: ForkServer | None = None

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> Process:
        try:
            return self._fork(argv, env, log_path)
        except ForkServerError as e:
            log.warning("preimported start refused, starting plainly: %s", e)
            return plain_start(argv, env, log_path)

    def _fork(self, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> Process:
        program = module_launch(argv)
        if program is None:
            raise ForkServerError(f"{argv[0]} is not `PYTHON -m MODULE`")
        server = self._server(*program, env)
        env = as_started(server.ready, server.env, env)
        why = env_refusal(server.ready, server.env, env)
        if why:
            raise ForkServerError(why)
        reply = server.request({"op": "start", "argv": list(argv), "env": dict(env),
                                "log": str(Path(log_path).resolve()), "cwd": os.getcwd()})
        if "pid" not in reply:
            raise ForkServerError(reply.get("error", f"unexpected reply {reply}"))
        return ForkedProcess(int(reply["pid"]), server)

    def _server(self, python: str, module: str, env: Mapping[str, str]) -> ForkServer:
        """The running supervisor for (python, module); a dead one is started again."""
        server = self.server
        if server is not None and server.alive() and (server.python, server.module) == (
                python, module):
            return server
        if server is not None and server.alive():
            raise ForkServerError(f"this slot's supervisor runs {server.python} -m "
                                  f"{server.module}")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.server = ForkServer(python, module, env, self.folder / "forkserver.log",
                                 also=self.also)
        log.info("supervisor %d imported %s in %.1f s", self.server.proc.pid, module,
                 self.server.ready.get("import_s", 0.0))
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


_SLOTS: dict[Path, Preimported] = {}


def for_study(spec: "StudySpec", folder: Path, also: Sequence[str] = ()) -> Spawn:
    """The starter of a study's vLLM processes whose supervisor lives in ``folder`` (one
    per slot and program: the servers in the slot's log folder, `vllm bench serve` in a
    folder below it): ``plain_start``, or (``engine.start = "preimported"``) that
    folder's ``Preimported`` (importing ``also`` as well), kept for the worker's life and
    closed at its exit."""
    if spec.engine.start != "preimported" or spec.engine.kind != "vllm":
        return plain_start
    key = Path(folder).resolve()
    if key not in _SLOTS:
        _SLOTS[key] = Preimported(key, also)
    return _SLOTS[key]


@atexit.register
def _close_all() -> None:
    for starter in _SLOTS.values():
        starter.close()
