"""`vllm bench serve` of the real vLLM CPU build beside our run, repeated on one server
(``engine.crosscheck_repeats``): what the H200 comparison reads vLLM's own spread from."""

from __future__ import annotations

import pytest

from tuner.runner import crosscheck
from tuner.storage import load_study_file
from tuner.testing.vllm_cpu import default_python

pytestmark = pytest.mark.e2e

PROMPTS = 6
STUDY = '''
[model]
path = "{model}"
context_len = 2048
[workload]
kind = "random"
input_len = 32
output_len = 8
max_concurrency = 3
num_requests = {prompts}
warmup_requests = 1
[engine]
python = "{python}"
crosscheck_trials = 1
crosscheck_repeats = 2
'''


def test_vllm_bench_serve_runs_twice_and_keeps_each_run(tiny_server, tiny_model_dir,
                                                         vllm_cpu_env, study_file):
    spec = load_study_file(study_file(STUDY.format(model=tiny_model_dir, prompts=PROMPTS,
                                                   python=default_python())))
    assert crosscheck.applicable(spec)
    got = crosscheck.run(spec, tiny_server.server.url, str(tiny_model_dir), vllm_cpu_env,
                         num_prompts=4)
    assert "error" not in got, got.get("error")
    runs = got["runs"]
    assert len(runs) == 2 and "repeat_error" not in got
    assert all(r["completed"] == 4 for r in runs)  # as many as our run right before it
    assert {k: got[k] for k in crosscheck.KEYS if k in got} == runs[0]  # the first run's
    assert runs[0]["duration"] != runs[1]["duration"]  # two runs, not one stored twice
    low, high, rel = crosscheck.spread(got, "output_throughput")
    assert 0 < low <= high and rel == pytest.approx((high - low) / ((high + low) / 2))


def test_vllm_bench_serve_runs_ladder_levels_at_a_request_rate(tiny_server, tiny_model_dir,
                                                               vllm_cpu_env, study_file):
    """Beside a ladder vLLM's benchmark runs open-loop levels: each rate's run sends a
    level's requests and reports its own figures under that rate."""
    ladder = "[slo]\np99_itl_ms = 5000\n[capacity]\nladder = true\nlevel_s = 2\n"
    spec = load_study_file(study_file(STUDY.format(model=tiny_model_dir, prompts=PROMPTS,
                                                   python=default_python()) + ladder))
    got = crosscheck.run_levels(spec, tiny_server.server.url, str(tiny_model_dir),
                                vllm_cpu_env, (1.5, 2.5))
    levels = got["levels"]
    assert [lv["request_rate"] for lv in levels] == [1.5, 2.5]
    assert all("error" not in lv for lv in levels), levels
    assert [lv["completed"] for lv in levels] == [3, 5]   # rate x level_s requests each
    assert all(lv["p99_itl_ms"] > 0 and lv["p99_ttft_ms"] > 0 for lv in levels)
