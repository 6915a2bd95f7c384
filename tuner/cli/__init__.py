"""The one `tuner` entry point: parse, call, render.

Each command lives in its own module in this package and exposes ``register(subparsers)``,
which adds its parser and sets ``func`` to a callable taking the parsed namespace and
returning an exit code. Errors from the tuner tree become one line on stderr.

Diagnostics go through stdlib ``logging`` (one logger per module, ``tuner.*``); ``main``
sets the one handler, on stderr, at INFO, DEBUG with ``-v``, WARNING with ``-q``. A
worker's progress lines are not log records: they stay as they are at every level.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import select
import sys

from tuner.errors import StorageError, TunerError

# Modules under tuner.cli that define commands; a missing one is skipped so that the
# package can grow command by command.
COMMAND_MODULES = (
    "study",
    "enqueue",
    "space",
    "demo",
    "model",
    "bench",
    "sim",
    "worker",
    "results",
    "dashboard",
    "service",
    "api",
)
# Which module holds a command, so that running one imports only its module (building every
# parser imports every command's dependencies: seconds, on each worker and server start).
COMMAND_HOME = {"pareto": "results", "best": "results", "report": "results",
                "launch": "service", "status": "service", "stop": "service"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors exit 2 with one line
        self.print_usage(sys.stderr)
        self.exit(2, f"tuner: error: {message}\n")


def _modules_for(argv: list[str] | None) -> tuple[str, ...]:
    """Only the module of the command being run; all of them for help or an unknown one."""
    words = sys.argv[1:] if argv is None else argv
    first = next((w for w in words if not w.startswith("-")), None)
    home = COMMAND_HOME.get(first, first)
    return (home,) if home in COMMAND_MODULES else COMMAND_MODULES


def build_parser(argv: list[str] | None = None,
                 modules: tuple[str, ...] | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="tuner", description=__doc__.splitlines()[0])
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-v", "--verbose", action="store_const", dest="log_level",
                      const=logging.DEBUG, help="also print debug lines")
    loud.add_argument("-q", "--quiet", action="store_const", dest="log_level",
                      const=logging.WARNING, help="print only warnings and errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    for name in modules or _modules_for(argv):
        try:
            module = importlib.import_module(f"tuner.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"tuner.cli.{name}":
                continue
            raise
        module.register(subparsers)
    return parser


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted (a test's capture, a
    redirected stream), not the one at set-up."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def configure_logging(level: int | None = None) -> None:
    """One handler for every ``tuner.*`` logger: the message alone, on stderr, at INFO
    unless ``level`` says otherwise."""
    root = logging.getLogger("tuner")
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = _Stderr()
    handler.setFormatter(logging.Formatter("%(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO if level is None else level)
    root.propagate = False


configure_logging()  # importing the CLI sets it up; main() then applies -v / -q


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:2] == ["sim", "serve"] and "--help=all" in words:
        # vLLM's `serve --help=all`, answered by the simulator (tuner.installed asks it)
        from tuner.sim import help_answer, wants_help_all

        sys.stdout.write(help_answer(wants_help_all(words) or "h200"))
        return 0
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        code = _call(args)
        sys.stdout.flush()  # a reader gone shows here, not in the interpreter's shutdown
    except BrokenPipeError:
        if not _stdout_gone():
            raise  # another pipe (a socket, a child's stdin): not ours to hide
        # The reader of stdout went away (`tuner ... | head -1`). Python's documented
        # recipe: point stdout at /dev/null, so that the shutdown's flush writes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (poll says POLLERR)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll, no file descriptor
        return False


def _call(args: argparse.Namespace) -> int:
    """The command's exit code; tuner's errors as one line on stderr."""
    try:
        return int(args.func(args) or 0)
    except TunerError as e:
        print(f"tuner: error: {e}", file=sys.stderr)
        return e.exit_code
    except Exception as e:
        from tuner.storage.outage import is_storage_error, reason

        if not is_storage_error(e):
            raise
        # a database error no command translated (a read-only file, a full disk)
        print(f"tuner: error: storage error: {reason(e)}", file=sys.stderr)
        return StorageError.exit_code
    except KeyboardInterrupt:
        print("tuner: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
