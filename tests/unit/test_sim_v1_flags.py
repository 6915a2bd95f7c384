"""The simulator's V1 scheduler flags: the long-prefill threshold caps a prompt's chunk per
step (vLLM's V1 scheduler), the partial-prefill flags act through vLLM 0.24's start checks and
the threshold they imply."""

from __future__ import annotations

import pytest

from tuner.sim.config import EngineConfig, resolve
from tuner.sim.profiles import load_gpu
from tuner.sim.scheduler import Request, Scheduler
from tuner.sim.shape import ModelShape
from tuner.sim.startup import partial_prefill_errors

pytestmark = pytest.mark.unit


def cfg(**kw) -> EngineConfig:
    base = dict(max_num_batched_tokens=64, max_model_len=256, max_num_seqs=8, block_size=4,
                enable_prefix_caching=False)
    return EngineConfig(**{**base, **kw})


def first_steps(c: EngineConfig, prompts: list[int], n: int = 3) -> list[list[int]]:
    s = Scheduler(c, num_blocks=500)
    for i, p in enumerate(prompts):
        s.add(Request(i, p, 4))
    out = []
    for _ in range(n):
        step = s.schedule()
        out.append([k for _, k, _ in step.work])
        s.complete(step)
    return out


def test_threshold_caps_each_prompts_chunk_and_lets_others_share_the_budget():
    assert first_steps(cfg(), [100, 30]) == [[64], [36, 28], [1, 2]]
    assert first_steps(cfg(long_prefill_token_threshold=16), [100, 30]) == [
        [16, 16], [16, 14], [16, 1]]


def test_threshold_zero_or_above_the_prompt_changes_nothing():
    plain = first_steps(cfg(), [40, 30])
    assert first_steps(cfg(long_prefill_token_threshold=0), [40, 30]) == plain
    assert first_steps(cfg(long_prefill_token_threshold=64), [40, 30]) == plain


def test_partial_prefills_imply_a_threshold_and_have_vllm_024s_start_checks():
    c = resolve({"max_model_len": 2000, "max_num_batched_tokens": 512,
                 "max_num_partial_prefills": 2}, _shape(), load_gpu("h200"))
    assert c.long_prefill_token_threshold == 80  # int(0.04 * max_model_len)
    assert partial_prefill_errors(c) is None
    assert "Chunked prefill must be enabled" in partial_prefill_errors(
        cfg(max_num_partial_prefills=2, enable_chunked_prefill=False))
    assert "max_long_partial_prefills=3 must be less than or equal" in partial_prefill_errors(
        cfg(max_num_partial_prefills=2, max_long_partial_prefills=3))
    assert "cannot be greater than the max_model_len" in partial_prefill_errors(
        cfg(max_num_partial_prefills=2, long_prefill_token_threshold=512))


def _shape() -> ModelShape:
    from pathlib import Path

    from tuner.sim.shape import load_shape

    return load_shape(Path(__file__).resolve().parents[2] / "studies" / "models" / "llama3-8b")
