"""Many `tuner` commands at once, as separate processes that start their command together.

A race test needs separate processes (each its own connections, its own view of a file or
database) that reach the contested step at the same moment; it does not need each of them
to import Python, SQLAlchemy and Optuna again, which costs about a CPU-second a process on
a small machine and spreads their arrival over seconds. ``race`` runs one helper process
that imports the CLI once, forks ``n`` children, and releases them together: each then
runs ``tuner ARGV`` (``tuner.cli.main``) with its stdout and stderr in files of its own,
and exits with the command's code.

    python -m tuner.testing.cli_race N OUTDIR ARGV...   # the helper; prints the exit codes
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def race(argv: list[str], n: int, out_dir: Path, *, timeout: float = 300.0,
         env: dict[str, str] | None = None) -> list[tuple[int, str, str]]:
    """Run ``tuner ARGV`` in ``n`` processes released together; each one's (exit code,
    stdout, stderr), in fork order. ``out_dir`` holds their output files. An AssertionError
    (with the helper's stderr) when the helper itself fails."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run = subprocess.run([sys.executable, "-m", "tuner.testing.cli_race", str(n),
                          str(out_dir), *map(str, argv)],
                         capture_output=True, text=True, timeout=timeout, env=env)
    assert run.returncode == 0, f"the race's helper failed: {run.stderr[-2000:]}"
    codes = json.loads(run.stdout)
    return [(code, (out_dir / f"{i}.out").read_text(), (out_dir / f"{i}.err").read_text())
            for i, code in enumerate(codes)]


def _child(i: int, out_dir: Path, gate: int, argv: list[str]) -> None:
    """In a forked child: output to its files, wait at the gate, run the command, exit."""
    from tuner.cli import main

    for fd, name in ((1, f"{i}.out"), (2, f"{i}.err")):
        with open(out_dir / name, "w") as f:
            os.dup2(f.fileno(), fd)
    code = 1
    try:
        os.read(gate, 1)
        try:
            code = main(argv) or 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(args: list[str]) -> int:
    n, out_dir, argv = int(args[0]), Path(args[1]), args[2:]
    from tuner.cli import build_parser

    build_parser(argv)  # the command's module and what it imports: once, before the fork

    gate, release = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(release)
            _child(i, out_dir, gate, argv)
        pids.append(pid)
    os.write(release, b"g" * n)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    print(json.dumps(codes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
