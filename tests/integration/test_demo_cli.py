"""`tuner demo` on a capacity study, the real command on the simulator: it says what the
study measures (the SLOs, the ladder, the objectives) before the first trial, and ends with
the answer (the flags with the most traffic within the SLOs, the capacity's interval as
`tuner best` prints it, the gain over vLLM's defaults) and the next commands (issue 63).
The study file sets a TTFT and an ITL limit and names no objectives: a capacity study."""

from __future__ import annotations

import os

import pytest

from tuner.testing.cli_fork import run_tuner
from tuner.testing.databases import sqlite_url
from tuner.testing.sim_studies import SIM

pytestmark = pytest.mark.integration
LADDER = "[capacity]\nreference_rate = 4\nmax_levels = 2\nlevel_s = 6\n"


def test_the_demo_of_a_capacity_study_ends_with_the_answer_and_the_next_command(study_file,
                                                                                 tmp_path):
    text = SIM.format(n=32, trials=3, scale=4).replace("p99_itl_ms = 200",
                                                       "p99_itl_ms = 200\np99_ttft_ms = 2000")
    path = study_file(text + LADDER, "demo.toml")
    url = sqlite_url(tmp_path)
    done = run_tuner(["demo", path, "--storage", url], timeout=900,
                     env={**os.environ, "TUNER_HOME": str(tmp_path / "home")})
    out = done.stdout
    assert done.returncode == 0, (out[-3000:], done.stderr[-3000:])
    before, _, after = out.partition("Pareto front (tuner pareto):")
    assert "SLOs: p99_itl_ms <= 200 ms, p99_ttft_ms <= 2000 ms" in before, before
    assert "load ladder of Poisson rates from 4 req/s" in before, before
    assert "objectives: maximize capacity_rps, minimize reference_p99_itl_ms" in before
    answer = after.split("The answer (tuner best demo):\n", 1)[1]
    about, gain, flags = answer.splitlines()[:3]
    assert about.lstrip().startswith("trial ") and "capacity 95 % interval" in about, about
    assert "req/s" in about and "p99_itl_ms <= 200 ms" in about, about
    assert "p99_ttft_ms <= 2000 ms" in about, about
    assert gain.lstrip().startswith("gain over vLLM's defaults"), gain
    assert flags.strip() == "its flags:"
    assert "serve" in answer.splitlines()[3]
    nexts = answer.split("\nNext:\n", 1)[1]
    assert f"tuner best demo --storage {url} --max-itl-p99 100" in nexts, nexts
    assert f"tuner best demo --storage {url} --rate 4" in nexts, nexts
    assert "studies/template.toml" in nexts
