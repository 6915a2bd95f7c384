"""`vllm bench serve` of the real vLLM CPU build beside our run, repeated on one server
(``engine.crosscheck_repeats``): what the H200 comparison reads vLLM's own spread from;
beside a ladder, our levels and vLLM's runs taking turns at each rate. The ladder's runs
are forked from a pre-imported supervisor of vLLM's CLI, as a study with ``engine.start =
"preimported"`` starts them; the closed-loop runs start plainly."""

from __future__ import annotations

import os

import pytest

from tuner.engine.forkclient import ForkedProcess
from tuner.engine.preimport import Preimported
from tuner.runner import crosscheck
from tuner.runner.measure import one_level
from tuner.runner.plans import compile_trial
from tuner.storage import load_study_file
from tuner.testing.vllm_cpu import default_python

pytestmark = pytest.mark.e2e

PROMPTS = 6
STUDY = '''
[model]
path = "{model}"
served_name = "{model}"
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
crosscheck_repeats = {repeats}
'''
LADDER = "[slo]\np99_itl_ms = 5000\n[capacity]\nladder = true\nlevel_s = 2\n"


@pytest.fixture(scope="module")
def forked_bench(tmp_path_factory):
    """A ``Spawn`` that forks `vllm bench serve` from one supervisor for this module's
    tests, with the processes it started (each must be a fork: no silent fallback)."""
    preimported = Preimported(tmp_path_factory.mktemp("bench-supervisor"), crosscheck.BENCH_ALSO)
    started = []

    def start(argv, env, log):
        started.append(preimported(argv, env, log))
        return started[-1]

    start.started = started
    yield start
    preimported.close()


def _spec(study_file, model, repeats, ladder=""):
    return load_study_file(study_file(STUDY.format(model=model, prompts=PROMPTS, repeats=repeats,
                                                   python=default_python()) + ladder))


def test_vllm_bench_serve_runs_twice_and_keeps_each_run(tiny_server, tiny_model_dir,
                                                         vllm_cpu_env, study_file):
    spec = _spec(study_file, tiny_model_dir, 2)
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
                                                               vllm_cpu_env, study_file,
                                                               forked_bench):
    """Beside a ladder vLLM's benchmark runs open-loop levels: each rate's run sends a
    level's requests and reports its own figures under that rate; each run is a process
    forked from the supervisor."""
    spec = _spec(study_file, tiny_model_dir, 1, LADDER)
    before = len(forked_bench.started)
    got = crosscheck.run_levels(spec, tiny_server.server.url, str(tiny_model_dir),
                                vllm_cpu_env, (1.5, 2.5), starter=forked_bench)
    runs = forked_bench.started[before:]
    assert [type(p) for p in runs] == [ForkedProcess, ForkedProcess]
    assert len({p.pid for p in runs}) == 2 and all(p.poll() == 0 for p in runs)
    levels = got["levels"]
    assert [lv["request_rate"] for lv in levels] == [1.5, 2.5]
    assert all("error" not in lv for lv in levels), levels
    assert [lv["completed"] for lv in levels] == [3, 5]   # rate x level_s requests each
    assert all(lv["p99_itl_ms"] > 0 and lv["p99_ttft_ms"] > 0 for lv in levels)
    assert not any("runs" in lv or "ours" in lv for lv in levels)  # one vLLM run, no ours


def test_our_levels_and_vllms_runs_take_turns_at_each_bracket_rate(tiny_server, tiny_model_dir,
                                                                     vllm_cpu_env, study_file,
                                                                     forked_bench):
    """With repeats, each rate gets rounds of our level (on the same server, as the ladder
    measures one) then vLLM's run: both clients' figures, one a round."""
    spec = _spec(study_file, tiny_model_dir, 2, LADDER)
    server = tiny_server.server
    plan = compile_trial(spec, {}, server.port, (), inherited=os.environ)
    called = []

    def ours(rate, k):
        called.append((rate, k))
        return one_level(server, plan, rate, 2_000 + k).to_json()

    said = []
    before = len(forked_bench.started)
    got = crosscheck.run_levels(spec, server.url, str(tiny_model_dir), vllm_cpu_env, (2.0,),
                                ours, said.append, starter=forked_bench)
    assert [type(p) for p in forked_bench.started[before:]] == [ForkedProcess] * 2
    (level,) = got["levels"]
    assert called == [(2.0, 0), (2.0, 1)]
    assert said == [f"crosscheck {k}/2 at 2 req/s: {who}" for k in (1, 2)
                    for who in ("ours", "vLLM")]  # the worker's progress line
    assert "error" not in level and len(level["runs"]) == 2, level
    assert [r["completed"] for r in level["runs"]] == [4, 4]   # 2 req/s x 2 s each
    assert level["runs"][0]["duration"] != level["runs"][1]["duration"]
    assert len(level["ours"]) == 2
    for mine in level["ours"]:
        assert mine["offered_rps"] == 2.0 and mine["requests"] == 4 and mine["failed"] == 0
        # (its p99 ITL may read 0 here: the CPU build sends tokens in bursts, docs/loadgen.md)
        assert mine["p99_ttft_ms"] > 0 and "p99_itl_ms" in mine and "held" in mine
