"""The grid over a study's whole search space (tuner.space.grid), inside its rules."""

from __future__ import annotations

import pytest

from tuner.space import build_space
from tuner.space.grid import axis_levels, space_grid
from tuner.space.params import Param
from tuner.storage import load_study_file

pytestmark = pytest.mark.unit


def test_levels_follow_each_flags_range_and_scale():
    assert axis_levels(Param("max_num_batched_tokens", "int", 128, 32768, log=True), 4) == \
        (128, 813, 5161, 32768)
    assert axis_levels(Param("gpu_memory_utilization", "float", 0.5, 0.95, step=0.01), 4) == \
        (0.5, 0.65, 0.8, 0.95)
    assert axis_levels(Param("enforce_eager", "bool"), 9) == (False, True)
    assert axis_levels(Param("block_size", "choice", choices=(16, 32, 64)), 2) == (16, 32, 64)
    # narrow integer ranges collapse to the distinct values
    assert axis_levels(Param("max_num_seqs", "int", 8, 10), 5) == (8, 9, 10)


@pytest.mark.parametrize("rules", ["article", "vllm-v1"])
def test_every_point_is_complete_and_inside_the_rules(rules):
    spec = load_study_file("studies/llama3-8b-h200.toml")
    spec = spec.model_copy(update={"space": spec.space.model_copy(update={"rules": rules})})
    space = build_space(spec)
    axes, points = space_grid(space, levels=3)
    full = 1
    for values in axes.values():
        full *= len(values)
    assert 0 < len(points) < full  # the rules leave some combinations out
    for flags in points:
        assert set(flags) == set(space.names)
        assert space.contains(flags) and not space.rules.violations(flags, space.context)
    chunked_with_prefix = [f for f in points
                           if f["enable_chunked_prefill"] and f["enable_prefix_caching"]]
    assert bool(chunked_with_prefix) == (rules == "vllm-v1")  # the article forbids the pair
    unchunked_short = [f for f in points if not f["enable_chunked_prefill"]
                       and f["max_num_batched_tokens"] < f["max_model_len"]]
    assert unchunked_short == []  # vLLM refuses a budget below max-model-len without chunking
