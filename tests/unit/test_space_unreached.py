"""tuner.space.unreached: which caps a trial's engine never reached, from its report."""

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from tuner.space.unreached import unbound_moves

pytestmark = pytest.mark.unit

SPACE = {"max_num_batched_tokens": IntDistribution(64, 32768, log=True),
         "max_num_seqs": IntDistribution(8, 1024, log=True),
         "gpu_memory_utilization": FloatDistribution(0.5, 0.95),
         "enable_prefix_caching": CategoricalDistribution((False, True))}
RAN = {"max_num_batched_tokens": 8192, "max_num_seqs": 256, "gpu_memory_utilization": 0.9,
       "enable_prefix_caching": True}
QUIET = {"running_peak": 256.0, "kv_cache_usage_peak": 0.95, "preemptions": 0.0,
         "prefix_cache_queries": 1000.0, "prefix_cache_hits": 400.0}


def test_a_cap_the_engine_reached_moves_nothing():
    assert unbound_moves(RAN, QUIET, SPACE) == []
    assert unbound_moves(RAN, None, SPACE) == [] and unbound_moves(RAN, {}, SPACE) == []


EAGER = {"enforce_eager": True}  # no CUDA graphs: the sequences set nothing else


def test_sequences_under_the_cap_move_it_up_to_the_budget_and_down_to_the_peak():
    moves = unbound_moves(RAN, {**QUIET, "running_peak": 90.0}, SPACE, EAGER)
    assert [m["max_num_seqs"] for m in moves] == [1024, 100]  # ceil(90 / 0.9)
    assert all({k: v for k, v in m.items() if k != "max_num_seqs"} ==
               {k: v for k, v in RAN.items() if k != "max_num_seqs"} for m in moves)
    small = {**RAN, "max_num_batched_tokens": 512}
    assert [m["max_num_seqs"] for m in unbound_moves(small, {**QUIET, "running_peak": 90.0},
                                                     SPACE, EAGER)] == [512, 100]
    # a peak within the polling margin of the cap: it may have been reached between polls
    assert unbound_moves(RAN, {**QUIET, "running_peak": 240.0}, SPACE, EAGER) == []


def test_sequences_move_only_as_far_as_the_cuda_graphs_stay_the_same():
    """With the capture size left to vLLM (twice the sequences, at most 512 tokens), a
    step of 145 to 512 tokens runs as a graph with 256 sequences and without one with 72:
    not the same measurement."""
    peak = {**QUIET, "running_peak": 64.0}
    graphs = {"enforce_eager": False}
    assert [m["max_num_seqs"] for m in unbound_moves(RAN, peak, SPACE, graphs)] == [1024]
    assert [m["max_num_seqs"] for m in unbound_moves({**RAN, "max_num_seqs": 1000}, peak,
                                                     SPACE, graphs)] == [1024, 256]
    # under 256 sequences every cap captures its own size: nothing moves either way
    assert unbound_moves({**RAN, "max_num_seqs": 128}, peak, SPACE, graphs) == []
    # unless the graphs already cover the budget, which no step exceeds
    tiny = {**RAN, "max_num_batched_tokens": 128, "max_num_seqs": 100}
    assert [m["max_num_seqs"] for m in unbound_moves(tiny, peak, SPACE, graphs)] == [128, 72]
    # a capture size the launch gives does not follow the sequences
    given = {**graphs, "max_cudagraph_capture_size": 256}
    assert [m["max_num_seqs"] for m in unbound_moves({**RAN, "max_num_seqs": 128}, peak,
                                                     SPACE, given)] == [1024, 72]


def test_memory_moves_up_only_without_preemption_and_with_room_in_the_cache():
    roomy = {**QUIET, "kv_cache_usage_peak": 0.3}
    assert unbound_moves(RAN, roomy, SPACE) == [{**RAN, "gpu_memory_utilization": 0.95}]
    assert unbound_moves(RAN, {**roomy, "preemptions": 3.0}, SPACE) == []
    assert unbound_moves({**RAN, "gpu_memory_utilization": 0.95}, roomy, SPACE) == []


def test_prefix_caching_that_found_nothing_cached_could_be_off():
    missed = {**QUIET, "prefix_cache_hits": 0.0}
    assert unbound_moves(RAN, missed, SPACE) == [{**RAN, "enable_prefix_caching": False}]
    off = {**RAN, "enable_prefix_caching": False}
    assert unbound_moves(off, {**missed, "prefix_cache_queries": 0.0}, SPACE) == []


def test_only_flags_the_space_searches():
    fixed = {k: v for k, v in SPACE.items() if k == "max_num_batched_tokens"}
    report = {"running_peak": 10.0, "kv_cache_usage_peak": 0.1, "preemptions": 0.0,
              "prefix_cache_queries": 10.0, "prefix_cache_hits": 0.0}
    assert unbound_moves(RAN, report, fixed) == []


def test_gauges_that_saw_nothing_move_no_cap():
    """Seen on the vLLM CPU build under load: a run that served 24 requests reported a peak
    of 0 running and 0 KV usage (the API process lagged its engine): no evidence of slack."""
    blind = {**QUIET, "running_peak": 0.0, "kv_cache_usage_peak": 0.0}
    assert unbound_moves(RAN, blind, SPACE, EAGER) == []
