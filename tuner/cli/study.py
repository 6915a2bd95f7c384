"""`tuner study create FILE`, `tuner study list`."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from sqlalchemy.engine import make_url

from tuner.errors import UsageError
from tuner.search.sampler import require
from tuner.settings import settings
from tuner.spec import StudySpec
from tuner.storage import create_study, list_studies, load_study_file, mask, resolve_url
from tuner.storage.load import names_itself
from tuner.trials.queries import baseline_of


def add_storage_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", metavar="URL",
                        help="storage URL (default: $TUNER_STORAGE, else a SQLite file in "
                             "./.tuner); @FILE reads the URL from a file")


def again(command: str, arg: str | None, url: str) -> str:
    """``command`` (e.g. "tuner status S") as a hint that reaches the same storage: with
    the ``--storage`` the user gave (a URL file as given; a URL only without a password,
    which is never printed: then an export of ``TUNER_STORAGE`` is asked for instead).
    Unchanged when the storage came from the environment or is the default."""
    if not arg:
        return f"`{command}`"
    if arg.startswith("@"):
        return f"`{command} --storage {shlex.quote(arg)}`"
    if make_url(url).password is None:
        return f"`{command} --storage {shlex.quote(url)}`"
    return (f"`{command}` (first `export TUNER_STORAGE=URL` with the storage URL: it holds a "
            "password, which is not printed)")


def storage_source(arg: str | None) -> str:
    """Where the storage URL came from: the flag, the environment, or the default."""
    if arg:
        return "--storage"
    if settings().storage:
        return "TUNER_STORAGE"
    return "TUNER_STORAGE_FILE" if settings().storage_file else "the default"


def register(subparsers) -> None:
    p = subparsers.add_parser("study", help="create and list studies")
    sub = p.add_subparsers(dest="study_command", metavar="ACTION", required=True)
    c = sub.add_parser("create", help="create a study from a study file (idempotent)")
    c.add_argument("file", help="a study file, e.g. studies/demo-sim.toml")
    add_storage_flag(c)
    c.set_defaults(func=_create)
    ls = sub.add_parser("list", help="list the studies in a storage")
    add_storage_flag(ls)
    ls.set_defaults(func=_list)


def check_simulated_model(spec: StudySpec, file: str) -> None:
    """UsageError (exit 2, one line) where a study on the simulated engine names a model
    folder here whose config.json the simulator refuses (an architecture it does not model:
    ``tuner.sim.shape_from_config``), so that no worker launches a trial that cannot start.
    A folder absent here (on the workers' hosts only) is left to the workers."""
    if spec.engine.kind != "sim" or not (Path(spec.model.path) / "config.json").is_file():
        return
    from tuner.sim import load_shape

    try:
        load_shape(spec.model.path)
    except UsageError as e:
        raise UsageError(f"{file}: key 'model.path': {e}") from None


def _create(args: argparse.Namespace) -> int:
    spec = load_study_file(args.file)
    # exit 2 now rather than a traceback in every worker
    require(spec.search.sampler, len(spec.objectives))
    check_simulated_model(spec, args.file)
    url = resolve_url(args.storage)
    opened, created = create_study(spec, url)
    verb = "created" if created else ("updated" if opened.changed else "exists, unchanged")
    waiting = sum(1 for t in opened.study.get_trials(deepcopy=False)
                  if t.state.name == "WAITING" and baseline_of(t))
    print(f"study {spec.name} {verb} in {mask(url)}: rules {opened.space.rules.name}, "
          f"{len(opened.space.params)} tuned flags, {waiting} baselines queued")
    if not names_itself(args.file):
        print(f"name {spec.name}: from the file name ({Path(args.file).name}); set "
              "name = \"...\" in the file for another")
    if opened.changed:
        print(f"changed: {'; '.join(opened.changed)} (workers already running keep the old "
              "values until they start again)")
    print(f"engine: {opened.engine_note or opened.space.engine}")
    for note in opened.space.notes:
        print(f"  {note}")
    return 0


def _list(args: argparse.Namespace) -> int:
    url = resolve_url(args.storage)
    rows = list_studies(url)
    if not rows:
        print(f"no studies in {mask(url)}")
        return 0
    print(f"{'STUDY':<28} {'RULES':<8} {'TRIALS':>6}  {'BASELINES QUEUED':>16}  STATES")
    for r in rows:
        states = ", ".join(f"{k} {v}" for k, v in sorted(r.states.items())) or "-"
        print(f"{r.name:<28} {r.rules:<8} {sum(r.states.values()):>6}  "
              f"{r.baselines_queued:>16}  {states}")
    return 0
