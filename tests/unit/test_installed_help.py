"""Parsing an engine's `serve --help=all` answer (pure): the recorded vLLM 0.24.0 help,
excerpts of vLLM 0.32.0's, and the simulator's own answer."""

from pathlib import Path

import pytest

from tuner.installed import Installed, parse_answer, parse_help
from tuner.installed.helptext import HelpParseError

RECORDED_024 = (Path(__file__).resolve().parents[2] / "tuner" / "testing" / "vllm024" /
                "serve-help-all.txt")

# vLLM 0.32.0+cpu, `vllm serve --help=all`, cut (the log line is as vLLM prints it to stdout)
EXCERPT_032 = """\
INFO 12-01 11:00:58 [importing.py:46] Triton is installed but 0 active driver(s) found.
usage: vllm serve [model_tag] [options]

options:
  --disable-log-stats   Disable logging statistics. (default: False)

CacheConfig:
  Configuration for the KV cache.

  --block-size BLOCK_SIZE
                        Size of a contiguous cache block in number of tokens.
                        Accepts None (meaning "use default"). After
                        construction, always int. (default: None)
  --gpu-memory-utilization GPU_MEMORY_UTILIZATION, --device-memory-utilization GPU_MEMORY_UTILIZATION
                        The fraction of GPU memory to be used for the model
                        controls the corresponding device memory utilization.
                        (default: 0.92)

SchedulerConfig:
  Scheduler configuration.

  --async-scheduling, --no-async-scheduling
                        If set to False, disable async scheduling. (default:
                        None)
  --scheduling-policy {fcfs,priority}
                        The scheduling policy to use:
                        - "fcfs" means first come first served. (default: fcfs)
  --cudagraph-capture-sizes CUDAGRAPH_CAPTURE_SIZES [CUDAGRAPH_CAPTURE_SIZES ...]
                        Sizes to capture cudagraph. (default: None)
  --tensor-parallel-size TENSOR_PARALLEL_SIZE, -tp TENSOR_PARALLEL_SIZE
                        Number of tensor parallel groups. (default: 1)
"""


def test_each_kind_of_entry_is_read_with_its_default():
    flags = parse_help(EXCERPT_032)
    assert set(flags) == {"disable_log_stats", "block_size", "gpu_memory_utilization",
                          "async_scheduling", "scheduling_policy", "cudagraph_capture_sizes",
                          "tensor_parallel_size"}
    gmu = flags["gpu_memory_utilization"]
    assert (gmu.kind, gmu.default, gmu.aliases, gmu.group) == (
        "value", 0.92, ("--device-memory-utilization",), "CacheConfig")
    assert flags["block_size"].default is None  # decided at start
    a = flags["async_scheduling"]
    assert (a.kind, a.negatable, a.default, a.default_text) == ("bool", True, None, "None")
    assert flags["disable_log_stats"].kind == "bool" and not flags["disable_log_stats"].negatable
    assert flags["disable_log_stats"].default is False
    s = flags["scheduling_policy"]
    assert (s.kind, s.choices, s.default) == ("choice", ("fcfs", "priority"), "fcfs")
    assert flags["cudagraph_capture_sizes"].kind == "list"
    assert flags["tensor_parallel_size"].aliases == ("-tp",)
    assert flags["tensor_parallel_size"].default == 1


def test_recorded_024_help_has_the_partial_prefill_flags_and_its_defaults():
    flags = parse_help(RECORDED_024.read_text())
    assert len(flags) > 250
    assert flags["max_num_partial_prefills"].default == 1
    assert flags["max_long_partial_prefills"].default == 1
    assert flags["long_prefill_token_threshold"].default == 0
    assert flags["gpu_memory_utilization"].default == 0.92
    assert flags["performance_mode"].choices == ("balanced", "interactivity", "throughput")
    assert flags["optimization_level"].default == 2
    assert "fp8" in flags["kv_cache_dtype"].choices
    assert flags["enable_prefix_caching"].negatable


def test_answer_markers_give_engine_version_and_batch_defaults():
    text = ("tuner-probe: engine vllm 0.32.0+cpu\n"
            "tuner-probe: batch 2048 128 cpu\n" + EXCERPT_032)
    a = parse_answer(text)
    assert (a.engine, a.version, a.label) == ("vllm", "0.32.0+cpu", "vllm 0.32.0+cpu")
    assert (a.batch_defaults, a.batch_device) == ((2048, 128), "cpu")
    gpu = parse_answer(text.replace("batch 2048 128 cpu", "batch 8192 1024 NVIDIA H200 139.8 GiB"))
    assert gpu.batch_device == "NVIDIA H200 139.8 GiB"
    unknown = parse_answer(text.replace("batch 2048 128 cpu", "batch-unknown ImportError()"))
    assert unknown.batch_defaults is None


def test_answer_without_engine_line_or_usage_is_refused():
    with pytest.raises(HelpParseError, match="engine NAME VERSION"):
        parse_answer(EXCERPT_032)
    with pytest.raises(HelpParseError, match="usage"):
        parse_help("Traceback (most recent call last):\nImportError: no vllm\n")


def test_json_round_trip_keeps_everything():
    a = parse_answer("tuner-probe: engine vllm 0.24.0\ntuner-probe: batch 8192 1024 h200\n"
                     + RECORDED_024.read_text())
    assert Installed.from_json(a.to_json()) == a
    kept = a.only(["block_size", "no_such_flag"])
    assert list(kept.flags) == ["block_size"] and kept.label == "vllm 0.24.0"


def test_simulator_answers_with_its_own_version_and_flags():
    from tuner import __version__
    from tuner.sim.serveargs import help_answer

    a = parse_answer(help_answer("h200"))
    assert a.label == f"tuner-sim {__version__}"
    assert a.batch_defaults == (8192, 1024) and a.batch_device == "h200"
    assert a.flags["long_prefill_token_threshold"].default == 0
    assert a.flags["enable_prefix_caching"].default is True
    # flags the model cannot learn are not offered (refused when given: test_sim_flags)
    assert "async_scheduling" not in a.flags and "performance_mode" not in a.flags
