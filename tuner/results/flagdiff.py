"""Which flags of a configuration differ from vLLM's defaults (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tuner.numerics import is_lossy
from tuner.space.params import BY_NAME


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return a == b


def changed_flags(flags: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The flags whose value is not vLLM's default, in the catalogue's order."""
    order = {name: i for i, name in enumerate(BY_NAME)}
    names = sorted(flags, key=lambda n: (order.get(n, len(order)), n))
    return {n: flags[n] for n in names if n not in defaults or not _same(flags[n], defaults[n])}


def flag_words(flags: Mapping[str, Any]) -> str:
    """'--max-num-batched-tokens 16384 --no-enable-prefix-caching' (catalogue order); a
    lossy value is followed by '[lossy]' (tuner/numerics.py)."""
    words = []
    for name, value in flags.items():
        p = BY_NAME.get(name)
        words += p.argv(value) if p else [f"--{name.replace('_', '-')}", str(value)]
        if is_lossy(name, value):
            words.append("[lossy]")
    return " ".join(words) or "(vLLM's defaults)"
