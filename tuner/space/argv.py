"""Flags -> the `vllm serve` command line, as a list of words (never a shell string)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tuner.space.params import param


def flags_argv(flags: Mapping[str, Any]) -> list[str]:
    """Every flag written out explicitly, in catalogue-independent sorted order."""
    words: list[str] = []
    for name in sorted(flags):
        words += param(name).argv(flags[name])
    return words


def shell_line(argv: Sequence[str]) -> str:
    """A copy-pasteable rendering for humans (never executed)."""
    import shlex

    return " ".join(shlex.quote(w) for w in argv)
