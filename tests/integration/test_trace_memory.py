"""Issue 67, item 2: reading a trace keeps a process's memory bounded whatever the file is.
Each read runs in a process of its own, which reports its own peak RSS (``ru_maxrss``):
a 2 GB sparse file and ``/dev/zero`` are refused without being read, and the largest file
accepted (every line at the line cap, full of distinct hash ids, the file at the size cap)
stays under the bound too. The child's address space is capped, so that a read without
bound fails there quickly instead of taking the machine's memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.limits import MAX_TOKENS, MAX_TRACE_BYTES, MAX_TRACE_LINE_BYTES

pytestmark = pytest.mark.integration
PEAK_BOUND = 300 << 20  # bytes: what issue 67 asks of the worst trace
ADDRESS_SPACE = 2 << 30  # the child's cap, set once its modules are imported
READ = f"""
import resource, sys
from tuner.errors import UsageError
from tuner.loadgen.trace import read_trace
resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_SPACE}, {ADDRESS_SPACE}))
try:
    told = f"{{len(read_trace(sys.argv[1]))}} records"
except UsageError as e:
    told = str(e)
print(told)
# VmHWM, not ru_maxrss: getrusage's maximum survives execve, so it would read the peak of
# the (forked) pytest worker that started this process
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(int(hwm.split()[1]) * 1024)
"""


def _read(path: Path | str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    told, peak = out.stdout.strip().splitlines()
    return told, int(peak)


def _sparse(tmp_path: Path) -> Path:
    path = tmp_path / "sparse.jsonl"
    with open(path, "wb") as f:
        f.truncate(2 << 30)  # no block written: it costs no disk
    return path


def _largest(tmp_path: Path) -> Path:
    path, size, first = tmp_path / "largest.jsonl", 0, 10 ** 8
    per_line = (MAX_TRACE_LINE_BYTES - 100) // len(f"{first},")
    with open(path, "w") as f:
        for t in range(MAX_TRACE_BYTES):
            ids = ",".join(map(str, range(first + t * per_line, first + (t + 1) * per_line)))
            line = (f'{{"timestamp":{t},"input_length":{MAX_TOKENS},"output_length":1,'
                    f'"hash_ids":[{ids}]}}\n')
            if size + len(line) > MAX_TRACE_BYTES:
                return path
            size += f.write(line)
    return path


@pytest.mark.parametrize("make, told", [
    (_sparse, f"larger than {MAX_TRACE_BYTES}"),
    (lambda _tmp: "/dev/zero", "a character device, not a regular file"),
    (_largest, " records"),
], ids=["sparse-2GB", "dev-zero", "largest-accepted"])
def test_the_peak_memory_of_a_trace_read_stays_bounded(tmp_path, make, told):
    said, peak = _read(make(tmp_path))
    assert told in said, said
    assert peak < PEAK_BOUND, f"{said}: peak RSS {peak >> 20} MiB"
