"""The suite's CPU meter (tuner.testing.cpu_time): run on a real pytest session in a
subprocess, it charges a child's CPU to the test that ran the child, and its summary
ranks tests and files by what they cost."""

from __future__ import annotations

import json
import subprocess
import sys

from tuner.testing.cpu_time import summary

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
TESTS = f'''
import subprocess, sys

def test_child_burns():
    subprocess.run([sys.executable, "-c", {BURN!r}], check=True)

def test_idle():
    pass
'''


def test_a_childs_cpu_is_charged_to_the_test_that_ran_it(tmp_path):
    (tmp_path / "test_burn.py").write_text(TESTS)
    out = tmp_path / "cpu.jsonl"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tuner.testing.cpu_time",
                          f"--cpu-time={out}", "-p", "no:cacheprovider", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {r["test"].split("::")[-1]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"test_child_burns", "test_idle"}
    assert rows["test_child_burns"]["children_s"] >= 0.4
    assert rows["test_idle"]["children_s"] < 0.1
    burn, idle = rows["test_child_burns"], rows["test_idle"]
    assert burn["start"] <= burn["end"] <= idle["start"] <= idle["end"]  # one after the other
    assert burn["end"] - burn["start"] >= 0.4 and burn["worker"] == "main"
    text = summary(list(rows.values()))
    assert text.splitlines()[0].startswith("2 tests: ")
    costliest = text.splitlines()[3]
    assert costliest.endswith("test_child_burns"), text
    (worker,) = [line for line in text.splitlines() if line.strip().startswith("main ")]
    assert "2 tests" in worker, text


def test_the_summary_reads_a_file_and_refuses_a_bad_one_in_one_line(tmp_path):
    good = tmp_path / "cpu.jsonl"
    good.write_text(json.dumps({"test": "a.py::t", "self_s": 1.0, "children_s": 2.0}) + "\n")
    run = subprocess.run([sys.executable, "-m", "tuner.testing.cpu_time", str(good)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "3.0" in run.stdout and "a.py" in run.stdout, run.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    run = subprocess.run([sys.executable, "-m", "tuner.testing.cpu_time", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
