"""Many `tuner` commands at once, as separate processes that start their command together.

A race test needs separate processes (each its own connections, its own view of a file or
database) that reach the contested step at the same moment; it does not need each of them
to import Python, SQLAlchemy and Optuna again, which is most of the CPU such a process
spends and spreads their arrival over seconds. ``race`` starts one Python process
(``RACER``, run as ``python -c``, as ``start_worker`` runs ``python -m tuner``) that builds
the command's parser once (importing what the command imports), forks ``n`` children and
releases them together through a pipe: each runs ``tuner ARGV`` (``tuner.cli.main``) with
its stdout and stderr in files of its own, and exits with the command's code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# argv: N OUTDIR ARGV...; prints the children's exit codes (JSON), in fork order.
RACER = r'''
import json, os, sys, traceback
from tuner.cli import build_parser, main

n, out, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
build_parser(argv)  # the command's module and what it imports: once, before the fork
gate, release = os.pipe()
sys.stdout.flush(); sys.stderr.flush()
pids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        os.close(release)
        for fd, name in ((1, f"{i}.out"), (2, f"{i}.err")):
            with open(os.path.join(out, name), "w") as f:
                os.dup2(f.fileno(), fd)
        code = 1
        try:
            os.read(gate, 1)
            code = main(argv) or 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()  # in its .err file, as an interpreter would say it
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(code)
    pids.append(pid)
os.write(release, b"g" * n)
print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]))
'''


def race(argv: list, n: int, out_dir: Path, *, timeout: float = 300.0,
         env: dict[str, str] | None = None) -> list[tuple[int, str, str]]:
    """Run ``tuner ARGV`` in ``n`` processes released together; each one's (exit code,
    stdout, stderr), in fork order. ``out_dir`` holds their output files. An AssertionError
    (with the racer's stderr) when the racing process itself fails."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run = subprocess.run([sys.executable, "-c", RACER, str(n), str(out_dir), *map(str, argv)],
                         capture_output=True, text=True, timeout=timeout, env=env)
    assert run.returncode == 0, f"the racing process failed: {run.stderr[-2000:]}"
    codes = json.loads(run.stdout)
    return [(code, (out_dir / f"{i}.out").read_text(), (out_dir / f"{i}.err").read_text())
            for i, code in enumerate(codes)]
