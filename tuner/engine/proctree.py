"""Walking the process tree through /proc: to stop everything a server started, and for
tests to prove that nothing was left behind; and tying a child's life to its parent's."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1


def terminate_with_parent() -> None:
    """In a child (``preexec_fn``): get SIGTERM when the parent dies, even by SIGKILL, so
    that a killed worker leaves no server behind (the server then stops its own children)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command (state, ppid, ...; field 3 of
    proc(5) first), or None once the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command may hold spaces and parentheses: split after the last ')'
    return stat[stat.rfind(")") + 2:].split()


def _ppid_map() -> dict[int, int]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(entry.name)) is not None:
            out[int(entry.name)] = int(fields[1])
    return out


def descendants(*roots: int) -> list[int]:
    """Every living process below any of ``roots`` (not the roots themselves), from one
    reading of the process table."""
    children: dict[int, list[int]] = {}
    for child, parent in _ppid_map().items():
        children.setdefault(parent, []).append(child)
    found, stack = [], list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def in_group(pgid: int) -> list[int]:
    """Living processes of a process group."""
    pids = []
    for pid in _ppid_map():
        try:
            if os.getpgid(pid) == pgid and alive(pid):
                pids.append(pid)
        except ProcessLookupError:
            continue
    return pids


def started(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None once it is gone: with its pid,
    a name for one process that a later process given the same pid does not share."""
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [w.decode(errors="replace") for w in raw.split(b"\0") if w]
