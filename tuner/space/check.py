"""A study's ``[space]`` values against the catalogue: each fixed value, range end and
choice must have the flag's type and lie inside what vLLM accepts (``Param.problem``).
A stored launch (a queued baseline's command-line flags) meets the same catalogue again
before a worker runs it (``launch_problem``).

Pure: raises ``ValueError`` with one line naming the key, the bound and the fix; the study
loader turns it into a usage error.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from tuner.numerics import is_lossy
from tuner.space.params import Param, param


def check_fixed(p: Param, value: Any) -> None:
    problem = p.problem(value)
    if problem:
        raise ValueError(f"space.fixed.{p.name}: {problem}")


def check_override(p: Param, override: Any) -> None:
    """A ``[space.ranges.NAME]`` table: low/high for numbers, choices for the others."""
    key = f"space.ranges.{p.name}"
    ends = {k: getattr(override, k) for k in ("low", "high") if getattr(override, k) is not None}
    if p.kind in ("int", "float"):
        if override.choices is not None:
            raise ValueError(f"{key}: '{p.name}' takes low/high, not choices")
        for end, value in ends.items():
            # An int range may have fractional ends (rounded inwards), never outside bounds.
            problem = (Param(p.name, "float", bounds=p.bounds) if p.kind == "int"
                       else p).problem(value)
            if problem:
                raise ValueError(f"{key}.{end}: {problem}")
        return
    if ends or override.log is not None:
        raise ValueError(f"{key}: '{p.name}' takes choices = [...], not low/high/log")
    for value in override.choices or ():
        problem = p.problem(value)
        if problem:
            raise ValueError(f"{key}: choice {problem}")
    if override.choices is not None and len(set(map(repr, override.choices))) != len(
            override.choices):
        raise ValueError(f"{key}: a choice is listed twice; list each once")


def check_names(fixed: dict, ranges: dict, exclude: list) -> None:
    """Every named parameter is in the catalogue (KeyError lists the known ones)."""
    for name in (*fixed, *ranges, *exclude):
        param(name)


def launch_problem(launch: Any, opted_in: Collection[str]) -> str | None:
    """Why a stored launch may not reach a command line, in one line naming the flag, or
    None: not a table of flags, a name outside the catalogue, a value vLLM would refuse
    (type or bounds: ``Param.problem``), or a lossy value of a flag the study did not opt
    in to (``opted_in``: ``SearchSpace.lossy``). The study's own ranges are not applied: a
    baseline is launched as given, outside them."""
    if not isinstance(launch, Mapping):
        return f"the launch is {type(launch).__name__}, not a table of flags"
    for name, value in launch.items():
        try:
            p = param(name)
        except (KeyError, TypeError):
            return f"{name!r} is not a flag tuner knows"
        problem = p.problem(value)
        if problem:
            return f"{p.flag} {value!r}: {problem}"
        if name not in opted_in and is_lossy(name, value):
            return (f"{p.flag} {value!r} is lossy, and the study did not opt in "
                    f"([space] lossy)")
    return None
