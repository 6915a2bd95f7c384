"""Pure parts of the runner: argv rendering, log parsing, failure classes."""


import pytest

from tuner.engine import command as engine, logparse
from tuner.space.argv import flags_argv
from tuner.storage import load_study_file

FLAGS = {"max_num_batched_tokens": 4096, "enable_prefix_caching": False,
         "enable_chunked_prefill": True, "enforce_eager": True, "gpu_memory_utilization": 0.85,
         "tensor_parallel_size": 2}


def test_flags_are_explicit_words():
    argv = flags_argv(FLAGS)
    assert argv == ["--enable-chunked-prefill", "--no-enable-prefix-caching", "--enforce-eager",
                    "--gpu-memory-utilization", "0.85", "--max-num-batched-tokens", "4096",
                    "--tensor-parallel-size", "2"]
    assert "--no-enforce-eager" in flags_argv({"enforce_eager": False})


def test_launch_pins_gpus_and_uses_the_engine(study_file):
    spec = load_study_file(study_file('[model]\npath = "models/llama3-8b"\n[engine]\n'
                                      'kind = "vllm"\npython = "/opt/py"\n'
                                      '[engine.env]\nX = "1"\n'))
    launch = engine.launch(spec, FLAGS, 8123, (3, 5, 6))
    assert launch.argv[:3] == ("/opt/py", "-m", "vllm.entrypoints.openai.api_server")
    assert launch.env == {"X": "1", "CUDA_VISIBLE_DEVICES": "3,5"}  # tp 2: first two
    assert "--port" in launch.argv and "8123" in launch.argv
    assert launch.argv[-len(flags_argv(FLAGS)):] == tuple(flags_argv(FLAGS))


def test_engines_keep_their_compile_caches_in_the_boxs_folder(study_file, tmp_path):
    spec = load_study_file(study_file('[model]\npath = "models/llama3-8b"\n[engine]\n'
                                      'kind = "vllm"\n[engine.env]\nTRITON_CACHE_DIR = "/t"\n'))
    env = engine.launch(spec, {}, 1, (0,), cache_root=tmp_path / "cache",
                        inherited={"TORCHINDUCTOR_CACHE_DIR": "/box/inductor"}).env
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path / "cache" / "vllm")
    assert "TORCHINDUCTOR_CACHE_DIR" not in env  # the box's own setting is inherited
    assert env["TRITON_CACHE_DIR"] == "/t"  # the study's engine.env wins
    sim = load_study_file(study_file('[model]\npath = "models/llama3-8b"\n[engine]\n'
                                     'kind = "sim"\n', "sim.toml"))
    # the simulator keeps its compile-key markers there too, so a key repeats as on vLLM
    assert engine.launch(sim, {}, 1, (0,), cache_root=tmp_path).env["VLLM_CACHE_ROOT"] == str(
        tmp_path / "vllm")


def test_sim_engine_program(study_file):
    spec = load_study_file(study_file('[model]\npath = "models/llama3-8b"\n[engine]\n'
                                      'kind = "sim"\ntime_scale = 5\n'))
    argv = engine.launch(spec, {}, 1, (0,)).argv
    assert argv[1:4] == ("-m", "tuner.sim", "serve") and "--time-scale" in argv


LOG_OOM = """INFO 11-29 vLLM API server version 0.24.0
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."""
LOG_KV = ("ValueError: To serve at least one request with the models's max seq len (8192), "
          "(1.00 GiB KV cache is needed, which is larger than the available KV cache memory "
          "(0.50 GiB).")
LOG_FLAGS = ("ValueError: max_num_batched_tokens (128) is smaller than max_model_len (2048). "
             "This effectively limits the maximum sequence length")


def test_failure_classes():
    assert logparse.classify_start_failure(1, LOG_OOM) == "oom"
    assert logparse.classify_start_failure(1, LOG_KV) == "kv-cache-too-small"
    assert logparse.classify_start_failure(1, LOG_FLAGS) == "rejected-flags"
    assert logparse.classify_start_failure(2, "usage: ... error: argument --x") == "rejected-flags"
    assert logparse.classify_start_failure(None, "") == "start-timeout"
    assert logparse.classify_start_failure(-9, "Segmentation fault") == "crash"


def test_log_facts():
    log = LOG_OOM + "\nINFO GPU KV cache size: 920,192 tokens\n"
    assert logparse.kv_cache_tokens(log) == 920192
    assert logparse.kv_cache_tokens("CPU KV cache size: 2,097,152 tokens") == 2097152
    assert logparse.vllm_version(log) == "0.24.0"
    assert "OutOfMemoryError" in logparse.reason_line(LOG_OOM)


# Lines as vLLM 0.24 logged them on the H200 (../shared/h200-2026-12-01/logs/trial-00000.log).
LOG_ASYNC = (
    "(APIServer pid=838) INFO 12-01 08:33:21 [api_utils.py:273] non-default args: {'host': "
    "'127.0.0.1', 'port': 46259, 'model': '/tmp/llama3-8b-dummy', 'stream_interval': 4, "
    "'load_format': 'dummy'}\n"
    "(APIServer pid=838) INFO 12-01 08:33:47 [vllm.py:1006] Asynchronous scheduling is enabled.\n")


def test_async_scheduling_and_stream_interval_as_vllm_reports_them():
    assert logparse.async_scheduling(LOG_ASYNC, {}) is True
    assert logparse.async_scheduling(LOG_ASYNC, {"async_scheduling": False}) is False
    assert logparse.async_scheduling("WARNING Async scheduling is disabled because the V1 "
                                     "model runner ...", {}) is False
    assert logparse.async_scheduling("", {}) is None
    assert logparse.stream_interval(LOG_ASYNC, {}) == 4
    assert logparse.stream_interval(LOG_ASYNC, {"stream_interval": 8}) == 8
    assert logparse.stream_interval("non-default args: {'port': 1}", {}) == 1


def test_vllm_bench_sends_as_many_requests_as_our_run_did(tmp_path):
    from pathlib import Path

    from tuner.runner import crosscheck

    spec = load_study_file(Path("studies/llama3-8b-h200.toml"))
    argv = crosscheck.command(spec, "http://127.0.0.1:1", "m", tmp_path, 1573)
    assert argv[argv.index("--num-prompts") + 1] == "1573"  # the early stop's length
    argv = crosscheck.command(spec, "http://127.0.0.1:1", "m", tmp_path)
    assert argv[argv.index("--num-prompts") + 1] == str(spec.workload.num_requests)
    assert argv[argv.index("--max-concurrency") + 1] == "256"


def test_vllm_bench_is_as_long_as_our_run_right_before_it():
    """With confirmation runs vLLM's run follows the last of them, which it is compared
    with, so it sends as many requests as that run completed, not the first."""
    from tuner.runner import crosscheck
    from tuner.trials.record import TrialRecord

    runs = [{"metrics": {"output_throughput": 1.0, "completed": 1800.0}},
            {"metrics": {"output_throughput": 1.0, "completed": 1573.0}}]
    told = TrialRecord(metrics={"completed": 1800, "output_throughput": 1.0}, repeats=runs)
    assert crosscheck.num_prompts(told) == 1573
    assert crosscheck.num_prompts(TrialRecord(metrics={"completed": 1659})) == 1659
    assert crosscheck.num_prompts(TrialRecord(metrics={})) is None  # the study's count


def test_vllm_own_spread_is_the_range_over_its_runs_against_their_median():
    from tuner.runner import crosscheck

    runs = [{"median_ttft_ms": 1000.0}, {"median_ttft_ms": 2700.0}, {"median_ttft_ms": 1200.0}]
    low, high, rel = crosscheck.spread({"median_ttft_ms": 1000.0, "runs": runs}, "median_ttft_ms")
    assert (low, high) == (1000.0, 2700.0) and rel == pytest.approx(1700 / 1200)
    assert crosscheck.spread({"median_ttft_ms": 1000.0}, "median_ttft_ms") is None  # one run
    assert crosscheck.spread({"runs": runs[:1]}, "median_ttft_ms") is None


def test_crosscheck_repeats_are_bounded():
    from pathlib import Path

    spec = load_study_file(Path("studies/llama3-8b-h200.toml"))
    assert spec.engine.crosscheck_repeats == 1  # the stored studies' behaviour
    with pytest.raises(Exception, match="crosscheck_repeats"):
        type(spec.engine).model_validate({**spec.engine.model_dump(), "crosscheck_repeats": 0})


def test_vllm_bench_beside_a_ladder_runs_at_the_rates_that_bracket_capacity():
    from tuner.runner import crosscheck
    from tuner.trials.curve import Curve, Level

    def curve(*held_at, saturated=None):
        return Curve(levels=tuple(Level(offered_rps=r, held=h) for r, h in held_at),
                     saturated_rps=saturated)

    # measured out of order, as a bisection does: 8 held, 16 did not, 12 held, 14 did not
    assert crosscheck.bracket_rates(curve((8, True), (16, False), (12, True), (14, False))) \
        == (12, 14)
    assert crosscheck.bracket_rates(curve((8, True), (16, True))) == (16,)   # none above failed
    # held to the end: the warm-up's saturated throughput is the upper end (decision 0036:
    # trials that held at every level gave vLLM's runs only the lower rate)
    assert crosscheck.bracket_rates(curve((8, True), (16, True), saturated=26.1)) == (16, 26.1)
    assert crosscheck.bracket_rates(curve((8, True), (16, False), saturated=26.1)) == (8, 16)
    assert crosscheck.bracket_rates(curve((8, True), saturated=7.5)) == (8,)
    assert crosscheck.bracket_rates(curve((8, False), (4, False))) == (4,)   # none held
    assert crosscheck.bracket_rates(None) == () == crosscheck.bracket_rates(curve())


def test_vllm_bench_at_a_rate_is_one_open_loop_level(tmp_path):
    from pathlib import Path

    from tuner.loadgen.ladder import level_requests
    from tuner.runner import crosscheck

    spec = load_study_file(Path("studies/llama3-8b-h200.toml"))
    argv = crosscheck.command(spec, "http://127.0.0.1:1", "m", tmp_path,
                              level_requests(12.5, 16), request_rate=12.5)
    assert argv[argv.index("--request-rate") + 1] == "12.5"
    assert argv[argv.index("--num-prompts") + 1] == "200"
    assert argv[argv.index("--num-warmups") + 1] == "0"
    assert "--max-concurrency" not in argv       # arrivals, not a closed loop
    seeds = {crosscheck.command(spec, "u", "m", tmp_path, 10, 12.5, run)[
        argv.index("--seed") + 1] for run in range(3)}
    assert len(seeds) == 3  # each run its own prompts: no prefix-cache hit on the last ones
    assert level_requests(0.01, 16) == 1
