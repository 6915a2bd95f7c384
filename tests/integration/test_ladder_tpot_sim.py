"""A p99 TPOT limit is judged at every level of a ladder on a real simulated server: the
SLO's one verdict covers every limit a study sets (tuner.slo), none is dropped."""

from __future__ import annotations

import asyncio

import pytest

from tuner.capacity.run import run_ladder
from tuner.loadgen import SLO, LoadSpec, WorkloadSpec
from tuner.loadgen.ladder import LadderPlan
from tuner.testing.sim_server import MODEL_NAME, sim_server

pytestmark = pytest.mark.integration
TIME_SCALE = 8.0
WORKLOAD = WorkloadSpec(input_len=512, output_len=64, vocab_size=128256)
# The subject is the verdict, not whether the client kept up: the measurement limits are
# open, so that a loaded host (whose client lags) still gives levels to judge.
CLOSED_LOOP = LoadSpec(max_concurrency=32, num_requests=100, warmup_requests=8,
                       max_client_lag_ms=60000.0, min_gap_share=0.0)
# Loose TTFT and ITL limits: only the TPOT limit can decide a level below saturation.
LOOSE = dict(ttft_p99_ms=60000.0, itl_p99_ms=60000.0)


def ladder(tmp_path, tpot_ms: float):
    with sim_server(tmp_path, "--gpu", "l4", time_scale=TIME_SCALE) as url:
        return asyncio.run(run_ladder(
            url, MODEL_NAME, WORKLOAD, CLOSED_LOOP, SLO(**LOOSE, tpot_ms=tpot_ms),
            LadderPlan(max_levels=2, stop_on_miss=False), level_s=60.0,
            time_scale=TIME_SCALE))


def test_a_tpot_limit_below_the_servers_tpot_fails_every_level(tmp_path):
    run = ladder(tmp_path, tpot_ms=1.0)  # a simulated L4's TPOT is tens of ms
    assert run.curve.slo["p99_tpot_ms"] == 1.0
    for lv in run.curve.levels:  # a level that measured the client is judged too
        margin = lv.margins["p99_tpot_ms"]
        assert margin["margin"] > 1.0 and margin["margin"] == pytest.approx(
            lv.judged("p99_tpot_ms") / 1.0)
        assert "p99_tpot_ms" in lv.estimates  # the p99 came with its interval
        assert not lv.held, lv
    if all(lv.invalid_reason for lv in run.curve.levels):
        assert run.curve.capacity_rps is None  # nothing measured the server: no capacity
    else:
        assert run.curve.capacity_rps == 0.0


def test_a_tpot_limit_above_it_holds_and_is_still_judged(tmp_path):
    run = ladder(tmp_path, tpot_ms=30000.0)
    valid = [lv for lv in run.curve.levels if lv.invalid_reason is None]
    assert valid, "every level measured the client: no verdict to check"
    assert valid[0].held or valid[0].offered_rps > run.curve.levels[0].offered_rps, valid[0]
    for lv in valid:
        assert lv.margins["p99_tpot_ms"]["margin"] < 1.0
        if not lv.held:  # then another limit (the backlog, near saturation) decided it
            worst = max(lv.margins.items(), key=lambda kv: kv[1]["margin"])
            assert worst[0] != "p99_tpot_ms" and worst[1]["margin"] > 1.0, lv.margins
