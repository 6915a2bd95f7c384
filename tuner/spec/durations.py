"""Durations as people write them: '90' or '90s', '15m', '2h', '1d' (one parser for the
CLI's --timeout, the study file's search.deadline and the stopping rule)."""

from __future__ import annotations

import re

from tuner.errors import UsageError

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(text: str | None) -> float | None:
    """Seconds, or None when ``text`` is not a duration."""
    m = _DURATION.fullmatch(text or "")
    return None if m is None else float(m.group(1)) * _UNIT_S[m.group(2)]


def parse_duration(text: str) -> float:
    """Seconds; ``UsageError`` (exit 2) when ``text`` is not a duration."""
    seconds = duration_s(text)
    if seconds is None:
        raise UsageError(f"not a duration: {text!r}; use e.g. 90s, 15m, 2h")
    return seconds
