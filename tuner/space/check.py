"""A study's ``[space]`` values against the catalogue: each fixed value, range end and
choice must have the flag's type and lie inside what vLLM accepts (``Param.problem``).

Pure: raises ``ValueError`` with one line naming the key, the bound and the fix; the study
loader turns it into a usage error.
"""

from __future__ import annotations

from typing import Any

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
