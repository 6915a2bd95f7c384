"""Where the test suite's CPU goes: a pytest plugin and its summary.

    .venv/bin/python -m pytest -p tuner.testing.cpu_time --cpu-time=/tmp/cpu.jsonl tests ...
    .venv/bin/python -m tuner.testing.cpu_time /tmp/cpu.jsonl [--most 30]

The plugin appends one JSON line per test to the file: the test's node id, the CPU seconds
of the process that ran it (``self_s``: the pytest or xdist worker, fixtures included) and
of the child processes it reaped meanwhile (``children_s``: servers, workers, CLI runs,
and the processes a supervisor forked for it, as ``tuner.engine.forkclient`` reports
them; a child that outlives its test counts where it is reaped), the wall-clock times it
began and ended (``start``, ``end``: seconds since the epoch) and the xdist worker that ran it
(``worker``; "main" without xdist). Works under pytest-xdist (each worker appends whole
lines). The summary prints the totals, the costliest tests and files, and each worker's
busy time and last end: where the run waited on one worker's tail rather than on the CPU.
A measurement tool, never a pass/fail check.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections import Counter
from pathlib import Path

import pytest


def _worker(config: pytest.Config) -> str:
    """The xdist worker running this session ("gw0"...), "main" without xdist (read from
    the session, not from the environment, which a pytest run inside a test inherits)."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput["workerid"] if workerinput else "main"


def _cpu() -> tuple[float, float]:
    """(this process's CPU seconds, its children's): reaped children, and the processes
    forked for it by a supervisor (``tuner.engine.forkclient``: the suite's `tuner`
    commands, pre-imported servers) whose exit it has seen."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    forkclient = sys.modules.get("tuner.engine.forkclient")
    forked = forkclient.reaped_cpu_s() if forkclient is not None else 0.0
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime + forked


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-time", metavar="FILE", default=None,
                     help="append each test's CPU seconds (its own, its children's) to FILE")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    path = item.config.getoption("--cpu-time")
    before, start = _cpu(), time.time()
    yield
    if path:
        after = _cpu()
        line = json.dumps({"test": item.nodeid, "self_s": round(after[0] - before[0], 3),
                           "children_s": round(after[1] - before[1], 3),
                           "start": round(start, 3), "end": round(time.time(), 3),
                           "worker": _worker(item.config)})
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def summary(rows: list[dict], most: int = 30) -> str:
    """The totals, the ``most`` costliest tests and files, as text."""
    def cost(r: dict) -> float:
        return r["self_s"] + r["children_s"]

    own = sum(r["self_s"] for r in rows)
    kids = sum(r["children_s"] for r in rows)
    lines = [f"{len(rows)} tests: {own + kids:.0f} CPU s ({own:.0f} in pytest's processes, "
             f"{kids:.0f} in their children)", "", "costliest tests (CPU s: own + children):"]
    for r in sorted(rows, key=cost, reverse=True)[:most]:
        lines.append(f"  {cost(r):7.1f}  {r['self_s']:6.1f} + {r['children_s']:6.1f}  {r['test']}")
    files: Counter[str] = Counter()
    for r in rows:
        files[r["test"].split("::")[0]] += cost(r)
    lines += ["", "costliest files:"]
    lines += [f"  {c:7.1f}  {f}" for f, c in files.most_common(most)]
    lines += timeline(rows)
    return "\n".join(lines)


def timeline(rows: list[dict]) -> list[str]:
    """Each worker's tests, busy seconds and last end, from the run's first start (lines of
    text; none for rows without times, as the plugin wrote them before it kept times)."""
    timed = [r for r in rows if "start" in r and "end" in r]
    if not timed:
        return []
    t0 = min(r["start"] for r in timed)
    wall = max(r["end"] for r in timed) - t0
    lines = ["", f"workers (wall {wall:.0f} s from the first test's start):"]
    for worker in sorted({r.get("worker", "main") for r in timed}):
        mine = [r for r in timed if r.get("worker", "main") == worker]
        busy = sum(r["end"] - r["start"] for r in mine)
        last = max(r["end"] for r in mine) - t0
        lines.append(f"  {worker:>6}  {len(mine):5d} tests  busy {busy:6.0f} s  "
                     f"last end {last:6.0f} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", type=Path)
    p.add_argument("--most", type=int, default=30)
    args = p.parse_args(argv)
    try:
        rows = [json.loads(line) for line in args.file.read_text().splitlines() if line]
    except (OSError, ValueError) as e:
        print(f"cpu_time: error: {args.file}: {e}", file=sys.stderr)
        return 2
    print(summary(rows, args.most))
    return 0


if __name__ == "__main__":
    sys.exit(main())
