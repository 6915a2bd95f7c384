"""Seen case 1 of issue 20: every `fixed`, `ranges` and `choices` value is checked against
the catalogue's type and vLLM's bounds, and an unknown GPU is refused, at `study create`:
exit 2, one line naming the key, the bound and the fix; nothing is stored."""

import optuna
import pytest

BASE = '[model]\npath = "models/llama3-8b"\n'

BAD = [
    # (study file tail, words the one line must hold)
    ('[space]\nfixed = { max_num_seqs = -4 }\n', ["space.fixed.max_num_seqs", "-4", "1"]),
    ('[space.ranges.block_size]\nchoices = [7, "x"]\n',
     ["space.ranges.block_size", "'x'"]),
    ('[space.ranges.block_size]\nchoices = [16, 7.5]\n', ["space.ranges.block_size", "7.5"]),
    ('[space.ranges.max_num_seqs]\nlow = 0\nhigh = 64\nlog = true\n',
     ["space.ranges.max_num_seqs.low", "0"]),
    ('[space.ranges.gpu_memory_utilization]\nlow = -0.5\nhigh = 3.0\n',
     ["space.ranges.gpu_memory_utilization.low", "-0.5"]),
    ('[space.ranges.gpu_memory_utilization]\nlow = 0.5\nhigh = 3.0\n',
     ["space.ranges.gpu_memory_utilization.high", "3", "1"]),
    ('[space]\nfixed = { gpu_memory_utilization = 1.5 }\n',
     ["space.fixed.gpu_memory_utilization", "1.5"]),
    ('[space]\nfixed = { kv_cache_dtype = "fp3" }\n', ["space.fixed.kv_cache_dtype", "fp3",
                                                       "fp8"]),
    ('[space]\nfixed = { enforce_eager = "yes" }\n', ["space.fixed.enforce_eager", "true"]),
    ('[space.ranges.enforce_eager]\nchoices = [1, 0]\n', ["space.ranges.enforce_eager"]),
    ('[space.ranges.kv_cache_dtype]\nlow = 1\n', ["space.ranges.kv_cache_dtype", "choices"]),
    ('[space.ranges.max_num_batched_tokens]\nlow = 128\nhigh = 1e300\n',
     ["space.ranges.max_num_batched_tokens.high"]),
    ('[space.ranges.max_num_seqs]\nlow = nan\n', ["space.ranges.max_num_seqs.low", "nan"]),
    ('[space]\nfixed = { tensor_parallel_size = 0 }\n', ["space.fixed.tensor_parallel_size"]),
    ('[hardware]\ngpu = "h900"\n', ["hardware.gpu", "h900", "h200", "gpu_memory_gib"]),
    ('[hardware]\ngpus = [0, -1]\n', ["hardware.gpus.1", "0"]),
    ('[hardware]\ngpus = [99999999999999999999]\n', ["hardware.gpus.0"]),
]


@pytest.mark.parametrize("tail,words", BAD, ids=[w[0] for _, w in BAD])
def test_bad_space_value_exits_2_with_one_line(tail, words, study_file, run_cli, tmp_path):
    path = study_file(BASE + tail, "bad.toml")
    url = f"sqlite:///{tmp_path}/x.db"
    code, out, err = run_cli("study", "create", path, "--storage", url)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert all(w in lines[0] for w in words), lines[0]
    assert "Traceback" not in err and out == ""
    assert optuna.get_all_study_summaries(url) == []


def test_values_vllm_accepts_outside_the_searched_range_are_kept(study_file, run_cli, tmp_path):
    """The CPU study's fixed block size 128 and memory share 0.4 lie outside the searched
    ranges but inside vLLM's bounds: still accepted."""
    path = study_file(BASE + '[hardware]\ngpu = "l40s"\ngpu_memory_gib = 44\n[space]\n'
                      'fixed = { block_size = 128, gpu_memory_utilization = 0.4 }\n'
                      'lossy = ["kv_cache_dtype"]\n'  # fp8_e5m2 is lossy: opted in (issue 17)
                      '[space.ranges.kv_cache_dtype]\nchoices = ["auto", "fp8_e5m2"]\n')
    code, out, err = run_cli("study", "create", path, "--storage", f"sqlite:///{tmp_path}/x.db")
    assert code == 0, err
