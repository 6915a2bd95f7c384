"""`tuner space show FILE`, `tuner space sample FILE -n N --json`."""

from __future__ import annotations

import argparse
import json
import random

from tuner.errors import UsageError
from tuner.installed import Installed
from tuner.space import SearchSpace, build_space, repair
from tuner.space.draw import draw
from tuner.storage import load_study_file
from tuner.storage.studies import ask_study_engine


def register(subparsers) -> None:
    p = subparsers.add_parser("space", help="show or sample a study's search space")
    sub = p.add_subparsers(dest="space_command", metavar="ACTION", required=True)
    s = sub.add_parser("show", help="the effective space and rules as a table")
    s.add_argument("file")
    s.add_argument("--engine-flags", action="store_true",
                   help="also list every flag the installed engine reports")
    s.set_defaults(func=_show)
    m = sub.add_parser("sample", help="draw proposals through the rules")
    m.add_argument("file")
    m.add_argument("-n", type=int, default=10, help="how many proposals (default 10)")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--json", action="store_true", help="one JSON object of flags per line")
    m.set_defaults(func=_sample)


def _space(path: str) -> tuple[SearchSpace, Installed | None, str]:
    """The study file's space as this host's engine decides it (answer cached in the
    study's folder), the engine's answer and, when it could not be asked, why."""
    spec = load_study_file(path)
    installed, note = ask_study_engine(spec)
    try:
        return build_space(spec, installed), installed, note
    except (ValueError, KeyError) as e:
        raise UsageError(f"{path}: {e.args[0]}") from e


def _source(space: SearchSpace, name: str) -> str:
    source = space.default_sources.get(name, "table")
    return {"engine": space.engine, "engine code": f"{space.engine} get_batch_defaults",
            "table": "our table"}.get(source, source)


def _show(args: argparse.Namespace) -> int:
    space, installed, note = _space(args.file)
    print(f"engine: {note or space.engine}")
    print(f"{'FLAG':<30} {'TYPE':<7} {'RANGE':<26} {'SCALE':<6} {'DEFAULT':<10} FROM")
    for p in space.params:
        rng = (f"{p.low:g} .. {p.high:g}" if p.kind in ("int", "float")
               else " | ".join(map(str, p.choices or (False, True))))
        scale = "log" if p.log else ("step" if p.step else "")
        print(f"{p.flag:<30} {p.kind:<7} {rng:<26} {scale:<6} "
              f"{str(space.defaults[p.name]):<10} {_source(space, p.name)}")
    for name, value in space.fixed.items():
        print(f"{'--' + name.replace('_', '-'):<30} {'fixed':<7} {str(value):<26} {'':<6} "
              f"{str(space.defaults[name]):<10} {_source(space, name)}")
    for line in space.notes:
        print(f"note: {line}")
    if args.engine_flags and installed is not None:
        _engine_flags(installed)
    print(f"\nrule set: {space.rules.name} ({space.rules.description})")
    for r in space.rules.rules:
        print(f"  - {r.id}: {r.text}")
    print("lossy values opted in: " + ", ".join(space.lossy) if space.lossy else
          "lossless: no flag value that changes the model's outputs is proposed "
          "(opt in with [space] lossy = [...])")
    print(f"workload needs max_model_len >= {space.context.min_model_len}; "
          f"model context {space.context.model_max_len}")
    return 0


def _engine_flags(installed: Installed) -> None:
    print(f"\nevery flag {installed.label} reports ({len(installed.flags)}):")
    for f in sorted(installed.flags.values(), key=lambda f: f.spelling):
        kind = "{" + ",".join(f.choices) + "}" if f.kind == "choice" else f.kind
        print(f"  {f.spelling:<44} {kind[:40]:<40} {f.default_text[:40]}")


def sample(space: SearchSpace, n: int, seed: int) -> list[dict]:
    """``n`` random proposals through the rules (repaired; infeasible ones left out)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        fixed = repair(space, draw(space, rng))
        if fixed.infeasible is None:
            out.append(dict(fixed.flags))
    return out


def _sample(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise UsageError("-n must be at least 1")
    space = _space(args.file)[0]
    for flags in sample(space, args.n, args.seed):
        print(json.dumps(flags, sort_keys=True) if args.json else
              " ".join(f"{k}={v}" for k, v in sorted(flags.items())))
    return 0
