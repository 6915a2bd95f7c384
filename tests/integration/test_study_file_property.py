"""Property test (issue 20): a random study file is either accepted, and then one
simulated trial runs to a recorded state, or refused with exit 2 and one line. Never a
traceback, never a hang past the study's own timeouts, never a RUNNING trial left behind.

Draws start from a small simulator study and change it: [space] fixed values, ranges and
choices of any type (negative, NaN, strings, lists), workload sizes, GPU names, unknown
keys, broken TOML. `study create` runs in-process (an exception would fail the test), the
worker as a real process. Bounded for a loaded 2-core machine: few examples, a fixed
seed (the same draws each run), a simulator 1000 times faster than real time (whose gaps
between tokens no client sees: the study asks for no share of them, or each run would be
judged invalid and run again)."""

from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import optuna
from hypothesis import HealthCheck, given, settings, strategies as st
from optuna.trial import TrialState

from tuner.cli import main
from tuner.space import CATALOGUE

STUDIES = Path(__file__).resolve().parents[2] / "studies"
START_S, BENCH_S = 30, 60

BASE = {
    "model": {"path": "models/llama3-8b"},
    "workload": {"input_len": 64, "output_len": 8, "max_concurrency": 4, "num_requests": 6,
                 "warmup_requests": 0, "max_client_lag_ms": 1000, "min_gap_share": 0.0},
    "search": {"n_trials": 2, "baselines": False},
    "engine": {"kind": "sim", "time_scale": 1000, "start_timeout_s": START_S,
               "benchmark_timeout_s": BENCH_S},
}

# Plausible values (each valid for some flag) as often as anything at all.
plausible = st.sampled_from([16, 32, 64, 128, 512, 2048, 8192, 0.6, 0.9, True, False, "auto",
                             "fp8"])
anything = st.one_of(st.integers(-10, 70000), st.floats(allow_nan=True, allow_infinity=False),
                     st.booleans(), st.sampled_from(["auto", "fp8", "x", "", "16"]),
                     st.lists(st.integers(-2, 64), max_size=2))
values = st.one_of(plausible, anything)
names = st.sampled_from([p.name for p in CATALOGUE] + ["max_batch"])


@st.composite
def study_files(draw) -> str:
    """About half the draws are valid study files: each kind of change is made with its
    own probability, from a seeded generator (hypothesis' own choices lean to the ends of
    each range, which would refuse nearly every draw)."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    doc = json.loads(json.dumps(BASE))
    space: dict = {}
    if rnd.random() < 0.4:
        for name, value in draw(st.dictionaries(names, values, min_size=1, max_size=2)).items():
            space.setdefault("fixed", {})[name] = value
    if rnd.random() < 0.4:
        for name in draw(st.lists(names, min_size=1, max_size=2, unique=True)):
            r = draw(st.fixed_dictionaries({}, optional={
                "low": values, "high": values, "log": st.booleans(),
                "choices": st.lists(values, max_size=3)}))
            space.setdefault("ranges", {})[name] = r
    if space:
        doc["space"] = space
    w = doc["workload"]
    if rnd.random() < 0.15:
        w["input_len"] = rnd.choice([0, -5, 300, 10**7])
    if rnd.random() < 0.1:
        w["max_concurrency"] = rnd.choice([1, 0])
    doc["hardware"] = {"gpu": rnd.choice(["h200"] * 6 + ["h100", "l4", "h900"])}
    if rnd.random() < 0.1:
        doc["engine"]["extra"] = 1  # an unknown key
    text = _toml(doc)
    return text + (rnd.choice(["[model\n", "\x00\xff"]) if rnd.random() < 0.1 else "")


def _toml(doc: dict, prefix: str = "") -> str:
    lines, tables = [], []
    for key, value in doc.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {_value(value)}")
    out = "\n".join(lines) + "\n"
    for key, value in tables:
        out += f"\n[{prefix}{key}]\n" + _toml(value, f"{prefix}{key}.")
    return out


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if v != v else repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(v)


@settings(max_examples=16, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(text=study_files())
def test_a_random_study_file_is_run_or_refused_in_one_line(text):
    with tempfile.TemporaryDirectory(prefix="tuner-prop-") as tmp:
        folder = Path(tmp)
        shutil.copytree(STUDIES / "models", folder / "models")
        path = folder / "s.toml"
        path.write_text(text, errors="surrogateescape")
        url = f"sqlite:///{folder}/t.db"
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(["study", "create", str(path), "--storage", url])
            except SystemExit as e:  # argparse
                code = e.code
        lines = err.getvalue().strip().splitlines()
        if code != 0:
            assert code == 2 and len(lines) == 1 and lines[0].startswith("tuner: error: "), (
                code, lines, text)
            return
        out = subprocess.run([sys.executable, "-m", "tuner", "worker", "s", "--storage", url,
                              "--gpus", "0", "--n-trials", "1"], capture_output=True,
                             text=True, timeout=START_S + BENCH_S + 60,
                             env={"TUNER_HOME": str(folder), "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0 and "Traceback" not in out.stderr, (out.stderr[-2000:], text)
        trials = optuna.load_study(study_name="s", storage=url).get_trials()
        assert trials and all(t.state in (TrialState.COMPLETE, TrialState.FAIL)
                              for t in trials), ([t.state for t in trials], text)
