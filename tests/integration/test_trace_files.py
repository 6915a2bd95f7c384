"""Issue 67, item 2: a trace file is read without trusting it. Each case is a real file on
disk (a real FIFO from ``os.mkfifo``): refused on one line naming it, a ``UsageError``
(exit 2 from the CLI), never a hang or a traceback. (Peak memory: test_trace_memory.py;
the bench-time reads: test_trace_replay.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tuner.errors import UsageError
from tuner.limits import MAX_TRACE_BYTES, MAX_TRACE_LINE_BYTES
from tuner.loadgen.trace import read_trace
from tuner.testing.cli_fork import run_tuner

pytestmark = pytest.mark.integration
SYNTHETIC = Path(__file__).resolve().parents[2] / "examples" / "traces" / "synthetic-mooncake.jsonl"
STUDY = """
[model]
path = "models/llama3-8b"
[workload]
kind = "trace"
trace = "t.jsonl"
[engine]
kind = "sim"
"""
OK = '{"timestamp": 0, "input_length": 5, "output_length": 1}'
HUGE = '{"timestamp": 1' + "0" * 400 + ', "input_length": 5, "output_length": 1}'
DEEP = "[" * 100_000 + "]" * 100_000


def _record(t, **more) -> str:
    return json.dumps({"timestamp": t, "input_length": 5, "output_length": 1, **more})


def _refused(path: Path, *words: str) -> str:
    with pytest.raises(UsageError) as e:
        read_trace(path)
    text = str(e.value)
    assert text.startswith(f"{path}: ") and "\n" not in text, text
    assert all(w in text for w in words), text
    return text


def test_a_fifo_is_refused_at_once_not_read(tmp_path):
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    got: list[BaseException | None] = []

    def read() -> None:
        try:
            read_trace(fifo)
        except BaseException as e:  # (the assertion below says what it was)
            got.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # blocked in open(): a writer that opens and closes frees it
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert not reader.is_alive() and got, "read_trace blocked on a FIFO"
    assert isinstance(got[0], UsageError) and "a FIFO, not a regular file" in str(got[0])


def test_a_character_device_is_refused_without_reading_it():
    _refused(Path("/dev/zero"), "a character device, not a regular file")


def test_a_file_above_the_size_cap_is_refused_before_a_byte_is_read(tmp_path):
    path = tmp_path / "t.jsonl"
    with open(path, "wb") as f:
        f.write(f"{OK}\n".encode())
        f.truncate(MAX_TRACE_BYTES + 1)
    _refused(path, f"larger than {MAX_TRACE_BYTES}")


def test_a_line_above_the_line_cap_is_refused(tmp_path):
    ids = [0] * (MAX_TRACE_LINE_BYTES // 2)  # a valid record, only too long a line
    path = tmp_path / "t.jsonl"
    path.write_text(f"{OK}\n" + _record(9, input_length=1 << 24, hash_ids=ids) + "\n")
    _refused(path, f"line 2: longer than {MAX_TRACE_LINE_BYTES} bytes")


@pytest.mark.parametrize("second, words", [
    (_record(31_000 * 365 * 86400 * 1000), ("line 2: arrivals span more than",)),
    (HUGE, ("line 2: timestamp (a number of", "bits) is not a number of milliseconds")),
    ('{"timestamp": 9, "input_length": 1' + "0" * 400 + ', "output_length": 1}',
     ("line 2: input_length (a number of",)),
    (DEEP, ("line 2: not a Mooncake record: JSON nested too deep",)),
], ids=["span-31000-years", "timestamp-400-digits", "tokens-400-digits", "json-100000-deep"])
def test_a_number_past_its_bound_or_deep_json_is_one_line(tmp_path, second, words):
    path = tmp_path / "t.jsonl"
    path.write_text(f"{OK}\n{second}\n")  # (two records: a trace, but for this line)
    text = _refused(path, *words)
    assert len(text) < 400, text


def test_an_azure_field_past_the_csv_limit_is_one_line(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,2\n"
                    f"2023-11-16 18:15:47,10,\"{'9' * 200_000}\"\n")
    _refused(path, "line 3: not a CSV row")


@pytest.mark.parametrize("make, words", [
    (lambda p: os.mkfifo(p), "a FIFO, not a regular file"),
    (lambda p: p.write_text(f"{OK}\n{HUGE}\n"), "timestamp (a number of"),
    (lambda p: p.write_text(f"{OK}\n{DEEP}\n"), "JSON nested too deep"),
], ids=["fifo", "timestamp-400-digits", "json-100000-deep"])
def test_study_create_refuses_the_trace_on_one_line_with_exit_2(study_file, tmp_path, make,
                                                               words):
    make(tmp_path / "t.jsonl")
    out = run_tuner(["study", "create", str(study_file(STUDY)), "--storage",
                     f"sqlite:///{tmp_path}/s.db"], timeout=30, env=dict(os.environ))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("tuner: error: ") and "key 'workload.trace'" in lines[0]
    assert words in lines[0], lines



# Every open of the trace during a benchmark, told by the interpreter's audit hook: True
# where it ran on the event loop's thread (the main one, under asyncio.run).
ON_THE_LOOP = """
import asyncio, sys, threading
from tuner.loadgen import LoadSpec, WorkloadSpec, run_benchmark
path, opens = sys.argv[1], []
sys.addaudithook(lambda event, args: opens.append(threading.current_thread() is
                 threading.main_thread()) if event == "open" and str(args[0]) == path else None)
load = LoadSpec(num_requests=2, speedup=1e6, warmup_requests=1, request_timeout_s=5.0)
asyncio.run(run_benchmark("http://127.0.0.1:9", "m", WorkloadSpec(kind="trace", trace=path),
                          load))  # its requests refused: data, not an error
print(opens)
"""


def test_the_bench_time_reads_run_off_the_event_loop():
    out = subprocess.run([sys.executable, "-c", ON_THE_LOOP, str(SYNTHETIC)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    opens = json.loads(out.stdout.strip().splitlines()[-1].lower())
    assert opens and not any(opens), opens  # schedule, warm-up and run: each in a thread
