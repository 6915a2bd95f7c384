"""The catalogue checked against what the installed engine says. Pure.

The catalogue keeps what vLLM's parser cannot say (ranges, log scale, the rules); the engine
says which flags exist, of which kind, and their defaults. A catalogue flag the engine lacks
(or describes otherwise) is unusable there; a default the engine prints replaces our table's,
and the batch defaults come from the engine's own ``get_batch_defaults`` when it ran on the
study's kind of device.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from tuner.installed.answer import EngineFlag, Installed
from tuner.space.params import Param

ENGINE, TABLE, ENGINE_CODE = "engine", "table", "engine code"


def unusable(p: Param, installed: Installed) -> str | None:
    """Why ``p`` cannot be tuned on ``installed`` (None: it can)."""
    flag = installed.flags.get(p.name)
    if flag is None:
        return f"{installed.label} has no {p.flag}"
    if p.kind == "bool" and flag.kind != "bool":
        return f"{installed.label} takes a value for {p.flag}, the catalogue a switch"
    if p.kind != "bool" and flag.kind == "bool":
        return f"{installed.label} has {p.flag} as a switch, the catalogue takes a value"
    if p.kind == "choice" and flag.kind == "choice":
        missing = [c for c in p.choices if str(c) not in flag.choices]
        if missing:
            return (f"{installed.label} {p.flag} takes {', '.join(flag.choices)}; not "
                    f"{', '.join(map(str, missing))}")
    return None


def _typed(p: Param, flag: EngineFlag) -> Any:
    """The engine's printed default in the catalogue's type, or None."""
    value = flag.default
    if value is None:
        return None
    if p.kind == "bool":
        return value if isinstance(value, bool) else None
    if p.kind == "int" or (p.kind == "choice" and all(isinstance(c, int) for c in p.choices)):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if p.kind == "float":
        return float(value) if isinstance(value, (int, float)) else None
    return str(value)


def same_device(installed: Installed, gpu: str) -> bool:
    """Whether the engine's batch defaults were computed on the study's kind of device."""
    seen = installed.batch_device.lower()
    model = re.match(r"[a-z]+\d*", gpu.lower())  # "h200", "a100" (of "a100-80g"), "cpu"
    return bool(seen and model) and model.group(0) in re.split(r"[\s-]+", seen)


def engine_defaults(params: tuple[Param, ...], table: Mapping[str, Any],
                    installed: Installed | None, gpu: str
                    ) -> tuple[dict[str, Any], dict[str, str]]:
    """Every flag's default and where it came from: ``engine`` (the parser printed it),
    ``engine code`` (its get_batch_defaults on this device) or ``table`` (ours)."""
    defaults, sources = dict(table), {name: TABLE for name in table}
    if installed is None:
        return defaults, sources
    for p in params:
        flag = installed.flags.get(p.name)
        value = _typed(p, flag) if flag is not None and not unusable(p, installed) else None
        if value is not None and p.name != "tensor_parallel_size":
            defaults[p.name], sources[p.name] = value, ENGINE
    if installed.batch_defaults and same_device(installed, gpu):
        tokens, seqs = installed.batch_defaults
        for name, value in (("max_num_batched_tokens", tokens), ("max_num_seqs", seqs)):
            defaults[name], sources[name] = value, ENGINE_CODE
    return defaults, sources


def unusable_here(names, installed: Installed) -> list[str]:
    """Why each of the flags ``names`` (a study's tuned and fixed ones) cannot run on
    ``installed``; empty when all can."""
    from tuner.space.params import BY_NAME

    return [r for r in (unusable(BY_NAME[n], installed) for n in names if n in BY_NAME) if r]
