"""The compile grid: log-spaced values per doubling, holding the range's ends, the
baselines and the study's fixed values; repair puts every proposal on it and keeps the
rules; the compile key reads what vLLM 0.24 hashes."""

import math
import random
import re

import pytest

from tuner.space import baselines, build_space, repair
from tuner.space.compile_grid import (GRID_RULE, MANTISSAS, compile_key, grid_values,
                                      neighbours)
from tuner.space.draw import draw
from tuner.storage import load_study_file
from tuner.testing.examples import ready_study_files

STUDIES = ready_study_files()



def gridded(spec):
    """``spec`` with the compile grid on (``[space] compile_grid = true``)."""
    return spec.model_copy(update={"space": spec.space.model_copy(update={"compile_grid": True})})

def test_grid_is_two_values_per_doubling_with_the_ends_and_anchors():
    grid = grid_values(100, 5000, anchors=(3000, 7000))
    assert grid[0] == 100 and grid[-1] == 5000
    assert 3000 in grid and 7000 not in grid
    inner = [g for g in grid if g not in (100, 5000, 3000)]
    assert inner == [128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096]
    steps = [math.log(b / a) for a, b in zip(inner, inner[1:])]
    assert max(steps) <= math.log(1.5) + 1e-9  # log-spaced: no gap over a half-doubling+
    assert len(MANTISSAS) == 2


def test_neighbours_nearer_first_on_a_log_scale():
    grid = (1024, 1536, 2048)
    assert neighbours(grid, 1536) == (1536,)
    assert neighbours(grid, 1300) == (1536, 1024)  # log(1536/1300) < log(1300/1024)
    assert neighbours(grid, 1200) == (1024, 1536)
    assert neighbours(grid, 4096) == () and neighbours(grid, 512) == ()


@pytest.mark.parametrize("path", STUDIES, ids=[s.stem for s in STUDIES])
def test_grid_holds_the_baselines_and_the_fixed_values(path):
    space = build_space(gridded(load_study_file(path)))
    for name, grid in space.grids.items():
        p = space.param(name)
        assert grid[0] == p.low and grid[-1] == p.high
        for b in baselines(space):
            value = b.flags[name]
            assert value in grid or not p.low <= value <= p.high, (b.name, name, value)
    budget = space.grids.get("max_num_batched_tokens", ())
    for bound in ("max_model_len", "max_num_seqs"):
        if budget and bound in space.fixed and budget[0] <= space.fixed[bound] <= budget[-1]:
            assert space.fixed[bound] in budget


def test_a_fixed_model_length_is_on_the_budget_grid(study_file):
    path = study_file('[model]\npath = "models/llama3-8b"\n[workload]\ninput_len = 1000\n'
                      'output_len = 200\n[space]\nfixed = { max_model_len = 3000 }\n',
                      "fixed.toml")
    space = build_space(gridded(load_study_file(path)))
    assert 3000 in space.grids["max_num_batched_tokens"]
    article = next(b for b in baselines(space) if b.name == "article")
    assert article.flags["max_num_batched_tokens"] == 6000
    assert 6000 in space.grids["max_num_batched_tokens"]


@pytest.mark.parametrize("path", STUDIES, ids=[s.stem for s in STUDIES])
@pytest.mark.parametrize("rules", ("article", "vllm-v1"))
def test_repair_puts_proposals_on_the_grid_and_keeps_the_rules(path, rules, tmp_path):
    text = re.sub(r'(?m)^rules = ".*"$', f'rules = "{rules}"', path.read_text())
    if 'rules = "' not in text:
        text += f'\n[space]\nrules = "{rules}"\n'
    copy = tmp_path / path.name
    copy.write_text(text.replace('path = "models/', f'path = "{path.parent}/models/')
                        .replace('path = "../.tuner', f'path = "{path.parent}/../.tuner'))
    space = build_space(gridded(load_study_file(copy)))
    rng = random.Random(7)
    snapped = 0
    for _ in range(400):
        raw = draw(space, rng)
        fixed = repair(space, raw)
        if fixed.infeasible:
            continue
        assert space.rules.violations(fixed.flags, space.context) == []
        assert space.contains(fixed.flags)
        for name, grid in space.grids.items():
            assert fixed.flags[name] in grid
        assert repair(space, fixed.flags).flags == fixed.flags  # idempotent
        snapped += GRID_RULE in fixed.fixed_rules
    assert snapped or not space.grids


def test_a_budget_without_chunked_prefill_snaps_up_to_hold_the_model_length():
    space = build_space(gridded(load_study_file(STUDIES[0].parent / "llama3-8b-h200.toml")))
    low = space.param("max_model_len").low  # the workload's need: the grid's first value
    raw = {**draw(space, random.Random(0)), "enable_chunked_prefill": False,
           "enable_prefix_caching": False, "max_model_len": low + 48,
           "max_num_batched_tokens": 1000, "max_num_seqs": 300}
    fixed = repair(space, raw)
    assert fixed.infeasible is None
    assert fixed.flags["max_model_len"] == low
    # the rule moves the budget to the model length; its nearer grid value (1024) is less
    assert low not in space.grids["max_num_batched_tokens"] and 1024 < low < 1536
    assert fixed.flags["max_num_batched_tokens"] == 1536
    assert fixed.flags["max_num_seqs"] == 256
    assert fixed.fixed_rules == ("budget-covers-model-len", GRID_RULE)


def test_compile_key_reads_the_capture_size_and_skips_eager():
    flags = {"max_num_batched_tokens": 2048, "max_num_seqs": 1024, "max_model_len": 8192,
             "block_size": 16, "kv_cache_dtype": "auto", "enforce_eager": False,
             "gpu_memory_utilization": 0.9, "enable_prefix_caching": True}
    key = compile_key(flags)
    # 256 sequences and more capture the same sizes (up to 512); memory and prefix caching
    # are not in vLLM's key
    assert compile_key({**flags, "max_num_seqs": 256, "gpu_memory_utilization": 0.5,
                        "enable_prefix_caching": False}) == key
    assert compile_key({**flags, "max_num_seqs": 128}) != key
    assert compile_key({**flags, "max_num_batched_tokens": 3072}) != key
    assert compile_key({**flags, "max_model_len": 4096}) != key
    assert compile_key({**flags, "enforce_eager": True}) is None
