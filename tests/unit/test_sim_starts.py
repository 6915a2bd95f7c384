"""The simulator's start model: phases by start path and compile cache, vLLM's compile key,
and a startup log that the runner's parser reads back."""

from __future__ import annotations

import pytest

from tuner.engine.startlog import start_phases
from tuner.sim.config import resolve
from tuner.sim.launch import StartLog
from tuner.sim.memory import plan_memory
from tuner.sim.profiles import engine_constants, load_gpu, start_constants
from tuner.sim.shape import LLAMA3_8B
from tuner.sim.starts import compile_key, key_hash, model_start
from tuner.sim.startup import startup_lines

pytestmark = pytest.mark.unit
H100 = load_gpu("h100")
K = engine_constants()
S = start_constants()
BASE = {"max_num_batched_tokens": 2048, "max_num_seqs": 256}


def cfg(**flags):
    return resolve({**BASE, **flags}, LLAMA3_8B, H100)


def start(c=None, **kw):
    c = c or cfg()
    return model_start(c, plan_memory(c, LLAMA3_8B, H100, K).weight_bytes, S, K, **kw)


def test_a_hit_is_shorter_than_a_miss_by_the_compile_and_the_warm_up():
    miss, hit = start(hit=False), start(hit=True)
    assert (miss.compile_cache, hit.compile_cache) == ("miss", "hit")
    assert miss.total - hit.total == pytest.approx(
        (S.compile_miss_s - S.compile_hit_s) + (S.warmup_miss_s - S.warmup_hit_s))
    assert miss.graph_capture == hit.graph_capture > 0
    assert miss.init_engine == pytest.approx(
        miss.compile + miss.kv_profile + miss.graph_capture + miss.warmup)


def test_eager_compiles_and_captures_nothing():
    eager = start(cfg(enforce_eager=True), hit=False)
    assert (eager.compile, eager.graph_capture, eager.compile_cache) == (None, None, None)
    assert eager.total < start(hit=True).total
    assert eager == start(cfg(enforce_eager=True), hit=True)  # nothing to hit


def test_preimported_skips_the_imports_and_fork_the_engine_cores():
    plain = start(hit=True)
    preimported = start(hit=True, preimported=True)
    forked = start(hit=True, preimported=True, fork=True)
    assert preimported.process_start < plain.process_start
    assert preimported.api_start == plain.api_start
    assert forked.api_start < preimported.api_start
    assert forked.total < preimported.total < plain.total


def test_capture_and_load_scale_with_sequences_and_weights():
    assert start(cfg(max_num_seqs=32)).graph_capture < start().graph_capture
    assert start(cfg(max_num_seqs=256)).graph_capture == start(cfg(max_num_seqs=1024)).graph_capture
    c = cfg()
    assert model_start(c, 2 * 10**9, S, K).weights < model_start(c, 16 * 10**9, S, K).weights


def key(**flags):
    return compile_key(cfg(**flags), LLAMA3_8B, K)


@pytest.mark.parametrize("flags", [
    {"max_num_batched_tokens": 4096}, {"max_num_seqs": 64}, {"max_model_len": 4096},
    {"block_size": 32}, {"kv_cache_dtype": "fp8"}, {"dtype": "float16"},
])
def test_the_key_changes_with_flags_in_vllms_key(flags):
    assert key_hash(key(**flags)) != key_hash(key())


@pytest.mark.parametrize("flags", [
    {"gpu_memory_utilization": 0.8}, {"enable_prefix_caching": False},
    {"scheduling_policy": "priority"}, {"long_prefill_token_threshold": 512},
    {"max_num_seqs": 1024},  # the same capture sizes as 256: 512 tokens
])
def test_the_key_does_not_change_with_flags_outside_it(flags):
    assert key_hash(key(**flags)) == key_hash(key())


def test_an_eager_start_has_no_key_and_a_key_has_a_stable_name():
    assert key(enforce_eager=True) is None
    assert key_hash(key()) == key_hash(dict(reversed(list(key().items()))))
    assert len(key_hash(key())) == 10 and int(key_hash(key()), 16) >= 0


@pytest.mark.parametrize("kw", [{"hit": False}, {"hit": True, "preimported": True, "fork": True}])
def test_the_runners_parser_reads_the_modelled_phases_back(kw, capsys):
    c = cfg()
    plan = plan_memory(c, LLAMA3_8B, H100, K)
    modelled = model_start(c, plan.weight_bytes, S, K, **kw)
    log = StartLog()
    for line in startup_lines(c, plan, modelled, "http://127.0.0.1:8000"):
        log.line(line.text, line.at_s, line.process)
    read = start_phases(capsys.readouterr().out + "INFO:     Application startup complete.\n")
    assert read["compile_cache"] == modelled.compile_cache
    assert read["compile_range"] == "1-2048"
    for name in ("weights", "compile", "kv_profile", "init_engine"):  # stated in the log
        assert read[name] == pytest.approx(getattr(modelled, name), abs=0.01), name
    assert read["graph_capture"] == round(modelled.graph_capture)
    for name in ("api_start", "engine_start", "warmup", "api_ready"):  # whole-second stamps
        assert abs(read[name] - getattr(modelled, name)) < 1, name
    assert abs(read["logged"] - (modelled.total - modelled.process_start)) < 1
