"""The space as the installed engine decides it (pure): flags it lacks are left out with a
note, a fixed one it lacks is an error naming the flag and the version, its printed defaults
replace our table's, the V1 scheduler's flags enter the space where it has them."""

from dataclasses import replace
from pathlib import Path

import pytest

from tuner.installed import Installed, parse_answer
from tuner.space import build_space
from tuner.space.installed import same_device, unusable, unusable_here
from tuner.space.params import param
from tuner.storage import load_study_file

RECORDED_024 = (Path(__file__).resolve().parents[2] / "tuner" / "testing" / "vllm024" /
                "serve-help-all.txt").read_text()
V024 = parse_answer("tuner-probe: engine vllm 0.24.0\n" + RECORDED_024)
# vLLM 0.32 dropped the partial-prefill flags: the same answer without them
V032 = Installed("vllm", "0.32.0+cpu",
                 {n: f for n, f in V024.flags.items() if "partial_prefills" not in n},
                 (2048, 128), "cpu")

STUDY = """
[model]
path = "/nonexistent"
context_len = 8192
num_attention_heads = 32
[hardware]
gpu = "{gpu}"
[workload]
input_len = 1024
output_len = 128
[space]
{space}
[engine]
kind = "vllm"
"""


def spec(tmp_path, space="", gpu="h200"):
    f = tmp_path / "s.toml"
    f.write_text(STUDY.format(space=space, gpu=gpu))
    return load_study_file(f)


V1_RANGES = """
[space.ranges.max_num_partial_prefills]
high = 4
[space.ranges.long_prefill_token_threshold]
choices = [0, 512, 2048]
[space.ranges.scheduling_policy]
choices = ["fcfs", "priority"]
[space.ranges.async_scheduling]
choices = [false, true]
"""


def test_v1_flags_are_tuned_where_the_engine_has_them(tmp_path):
    space = build_space(spec(tmp_path, V1_RANGES), V024)
    tuned = {p.name for p in space.params}
    assert {"max_num_partial_prefills", "long_prefill_token_threshold", "scheduling_policy",
            "async_scheduling"} <= tuned
    assert space.engine == "vllm 0.24.0" and space.notes == ()


def test_a_flag_the_engine_lacks_is_left_out_with_one_note(tmp_path):
    space = build_space(spec(tmp_path, V1_RANGES), V032)
    tuned = {p.name for p in space.params}
    assert "max_num_partial_prefills" not in tuned and "max_num_partial_prefills" not in space.fixed
    assert {"long_prefill_token_threshold", "async_scheduling"} <= tuned
    assert space.notes == ("--max-num-partial-prefills left out: vllm 0.32.0+cpu has no "
                           "--max-num-partial-prefills",)


def test_opt_in_flags_stay_out_unless_named(tmp_path):
    space = build_space(spec(tmp_path), V024)
    assert {p.name for p in space.params} == {
        "max_num_batched_tokens", "max_model_len", "gpu_memory_utilization",
        "enable_prefix_caching", "enable_chunked_prefill", "enforce_eager", "max_num_seqs",
        "block_size", "kv_cache_dtype"}
    assert set(space.fixed) == {"tensor_parallel_size"}
    assert space.notes == ()  # an opt-in flag the engine lacks, not asked for: no note
    assert build_space(spec(tmp_path), V032).notes == ()


def test_fixing_a_flag_the_engine_lacks_names_the_flag_and_the_version(tmp_path):
    s = spec(tmp_path, "fixed = { max_num_partial_prefills = 2 }")
    assert build_space(s, V024).fixed["max_num_partial_prefills"] == 2
    with pytest.raises(ValueError, match=r"^space.fixed.max_num_partial_prefills: vllm "
                                         r"0.32.0\+cpu has no --max-num-partial-prefills"):
        build_space(s, V032)


def test_engine_defaults_replace_the_table_and_say_so(tmp_path):
    changed = replace(V024.flags["gpu_memory_utilization"], default=0.9, default_text="0.9")
    engine = Installed("vllm", "0.2x", {**V024.flags, "gpu_memory_utilization": changed})
    space = build_space(spec(tmp_path), engine)
    assert space.defaults["gpu_memory_utilization"] == 0.9
    assert space.default_sources["gpu_memory_utilization"] == "engine"
    # the parser prints None for these: our table's values, marked as such
    assert space.defaults["block_size"] == 16 and space.default_sources["block_size"] == "table"
    assert space.defaults["max_num_batched_tokens"] == 8192
    assert space.default_sources["max_num_batched_tokens"] == "table"
    assert space.default_sources["max_model_len"] == "model"


def test_batch_defaults_come_from_the_engine_code_on_the_studys_device(tmp_path):
    on_h200 = replace(V024, batch_defaults=(16384, 1024), batch_device="NVIDIA H200 139.8 GiB")
    space = build_space(spec(tmp_path), on_h200)
    assert space.defaults["max_num_batched_tokens"] == 16384
    assert space.default_sources["max_num_batched_tokens"] == "engine code"
    # asked on a host without that GPU: our table (the engine's answer is for another device)
    elsewhere = replace(V024, batch_defaults=(2048, 256), batch_device="")
    assert build_space(spec(tmp_path), elsewhere).defaults["max_num_batched_tokens"] == 8192
    cpu = build_space(spec(tmp_path, gpu="cpu"), V032)
    assert (cpu.defaults["max_num_batched_tokens"], cpu.defaults["max_num_seqs"]) == (2048, 128)


def test_same_device_matches_gpu_models_not_substrings():
    dev = replace(V024, batch_device="NVIDIA H200 139.8 GiB")
    assert same_device(dev, "h200") and not same_device(dev, "h100")
    a100 = replace(V024, batch_device="NVIDIA A100-SXM4-80GB 79.2 GiB")
    assert same_device(a100, "a100-80g") and not same_device(a100, "l4")
    assert same_device(replace(V024, batch_device="cpu"), "cpu")


def test_stream_interval_stays_per_token_when_itl_is_measured(tmp_path):
    from tuner.errors import StudyFileError

    with pytest.raises(StudyFileError, match="space.ranges.stream_interval: an objective or "
                                             "SLO is an ITL"):
        spec(tmp_path, "[space.ranges.stream_interval]\nhigh = 8")  # ITL is the default
    f = tmp_path / "per-token.toml"
    f.write_text(STUDY.format(space="[space.ranges.stream_interval]\nhigh = 8", gpu="h200")
                 + '[[objectives]]\nmetric = "output_throughput"\ndirection = "maximize"\n'
                 '[[objectives]]\nmetric = "p99_itl_per_token_ms"\ndirection = "minimize"\n')
    tuned = build_space(load_study_file(f), V024).param("stream_interval")
    assert (tuned.low, tuned.high) == (1, 8)
    moved = replace(V024.flags["stream_interval"], default=10, default_text="10")
    engine = Installed("vllm", "9.9", {**V024.flags, "stream_interval": moved})
    space = build_space(spec(tmp_path), engine)
    assert space.fixed["stream_interval"] == 1
    assert any("--stream-interval fixed at 1" in n for n in space.notes)


def test_a_catalogue_flag_the_engine_describes_otherwise_is_unusable():
    as_value = replace(V024.flags["enforce_eager"], kind="value", negatable=False)
    engine = Installed("vllm", "x", {**V024.flags, "enforce_eager": as_value})
    assert "takes a value" in unusable(param("enforce_eager"), engine)
    narrow = replace(V024.flags["kv_cache_dtype"], choices=("auto",))
    engine = Installed("vllm", "x", {**V024.flags, "kv_cache_dtype": narrow})
    assert unusable(param("kv_cache_dtype"), engine).endswith("not fp8")
    assert unusable_here(["kv_cache_dtype", "block_size"], engine) == [
        unusable(param("kv_cache_dtype"), engine)]
