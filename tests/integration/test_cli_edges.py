"""Issue 67, item 6: small edges of the command line, each on real `tuner` processes.

Before: a reader of stdout that went away (`tuner study create ... | head -1`) left a
BrokenPipeError traceback; `tuner bench --workload trace` had no flag to name the trace
(every run ended in "kind 'trace' needs 'trace'")."""

from __future__ import annotations

import shutil
import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tuner.testing.cli_fork import run_tuner
from tuner.testing.fake_server import FakeScript, FakeServer

pytestmark = pytest.mark.integration
STUDIES = Path(__file__).resolve().parents[2] / "studies"
STUDY = '[model]\npath = "models/llama3-8b"\n[engine]\nkind = "sim"\n'


def _gone_reader(args: list[str], cwd: Path) -> tuple[int, str]:
    """`tuner ARGS` with stdout a pipe whose reader closed it before a byte was written
    (as `| head -1` does once it has its line): the exit code and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "tuner", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(60), err


def test_a_closed_stdout_ends_quietly(tmp_path):
    shutil.copytree(STUDIES / "models", tmp_path / "models")
    (tmp_path / "s.toml").write_text(STUDY)
    url = f"sqlite:///{tmp_path}/t.db"
    for args in (["study", "create", "s.toml", "--storage", url],
                 ["study", "list", "--storage", url]):
        code, err = _gone_reader(args, tmp_path)
        assert err == "" and code == 1, (args, code, err)
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["s"]
    # a stdout that is read is written as before
    out = subprocess.run([sys.executable, "-m", "tuner", "study", "list", "--storage", url],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0 and out.stdout.splitlines()[1].startswith("s "), out


# (timestamp ms, input tokens, output tokens): a replay of 6 requests goes through it twice
TRACE = ((0, 20, 3), (100, 30, 5), (250, 10, 2))


def _bench(url: str, *args: object, cwd: Path) -> subprocess.CompletedProcess:
    return run_tuner(["bench", "--url", url, "--num-requests", 6, "--warmup", 1,
                      "--min-gap-share", 0, "--no-progress", *args], cwd=cwd, timeout=120,
                     env={**os.environ, "OPENAI_API_KEY": ""})


def _one_line(out: subprocess.CompletedProcess, *words: str) -> None:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith("tuner: error: ") and all(w in lines[0] for w in words), lines


def test_bench_replays_the_trace_file_it_is_given(tmp_path):
    (tmp_path / "t.jsonl").write_text("".join(
        json.dumps({"timestamp": t, "input_length": i, "output_length": o}) + "\n"
        for t, i, o in TRACE))
    os.mkfifo(tmp_path / "fifo.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with FakeServer(FakeScript(ttft_ms=5, itl_ms=(1,))) as server:
        out = _bench(server.url, "--workload", "trace", "--trace", "t.jsonl", "--speedup",
                     10, "--json", "r.json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        m = json.loads((tmp_path / "r.json").read_text())["metrics"]
        assert m["completed"] == 6 and m["failed"] == 0
        assert m["total_input_tokens"] == 2 * sum(i for _, i, _ in TRACE)
        assert m["total_output_tokens"] == 2 * sum(o for _, _, o in TRACE)
        # checked as a study file's trace is: one line naming the file, never a hang
        for name, words in (("fifo.jsonl", ("fifo.jsonl", "FIFO")),
                            ("gone.jsonl", ("gone.jsonl",)),
                            ("empty.jsonl", ("empty.jsonl", "empty trace"))):
            _one_line(_bench(server.url, "--workload", "trace", "--trace", name,
                             cwd=tmp_path), *words)
        _one_line(_bench(server.url, "--workload", "trace", cwd=tmp_path), "--trace FILE")
        _one_line(_bench(server.url, "--trace", "t.jsonl", cwd=tmp_path), "--workload trace")
        _one_line(_bench(server.url, "--speedup", 2, cwd=tmp_path), "--workload trace")
