"""Metrics as vLLM defines them, on known inputs (no I/O)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tuner.loadgen.client import RequestOutput
from tuner.loadgen.metrics import (calculate_metrics, count_failures, meets_slo,
                                   noise_estimate, to_simulated_time, tpot)
from tuner.loadgen.spec import SLO

pytestmark = pytest.mark.unit


def ok(ttft: float, itl: list[float], tokens: int | None = None, start: float = 0.0,
       prompt: int = 10) -> RequestOutput:
    return RequestOutput(success=True, ttft=ttft, itl=list(itl), latency=ttft + sum(itl),
                         output_tokens=len(itl) + 1 if tokens is None else tokens,
                         prompt_len=prompt, start_time=start, chunks=len(itl) + 1)


def failed(reason: str) -> RequestOutput:
    return RequestOutput(success=False, reason=reason, error=f"{reason} detail")


def test_percentiles_are_exact_on_a_known_sample():
    # TTFTs of 1..100 ms: numpy's linear percentile gives p90 = 90.1 and p99 = 99.01.
    outs = [ok(k / 1000, [0.001]) for k in range(1, 101)]
    m = calculate_metrics(outs, dur_s=2.0)
    assert m["mean_ttft_ms"] == pytest.approx(50.5)
    assert m["median_ttft_ms"] == pytest.approx(50.5)
    assert m["p90_ttft_ms"] == pytest.approx(90.1)
    assert m["p99_ttft_ms"] == pytest.approx(99.01)
    assert m["std_ttft_ms"] == pytest.approx(np.std(np.arange(1, 101)))


def test_itls_are_pooled_over_requests_and_tpot_uses_output_tokens():
    a = ok(0.1, [0.01, 0.03])          # 3 tokens: TPOT = 0.04 / 2 = 20 ms
    b = ok(0.2, [0.02], tokens=5)      # usage says 5 tokens: TPOT = 0.02 / 4 = 5 ms
    m = calculate_metrics([a, b], dur_s=1.0)
    assert m["mean_itl_ms"] == pytest.approx(20.0)          # mean of 10, 30, 20
    assert m["median_itl_ms"] == pytest.approx(20.0)
    assert m["mean_tpot_ms"] == pytest.approx(12.5)
    assert m["mean_e2el_ms"] == pytest.approx((140 + 220) / 2)
    assert tpot(a) == pytest.approx(0.02)


def test_throughputs_count_successes_only_and_failures_by_reason():
    outs = [ok(0.1, [0.01] * 9, prompt=100), ok(0.1, [0.01] * 3, prompt=50),
            failed("http_500"), failed("http_500"), failed("ClientPayloadError")]
    m = calculate_metrics(outs, dur_s=2.0)
    assert (m["completed"], m["failed"]) == (2, 3)
    assert m["total_output_tokens"] == 14 and m["total_input_tokens"] == 150
    assert m["request_throughput"] == 1.0
    assert m["output_throughput"] == 7.0
    assert m["total_token_throughput"] == 82.0
    assert count_failures(outs) == {"http_500": 2, "ClientPayloadError": 1}


def test_single_token_outputs_have_no_tpot_and_empty_lists_count_as_zero():
    m = calculate_metrics([ok(0.05, [])], dur_s=1.0)
    assert m["mean_tpot_ms"] == 0.0 and m["p99_itl_ms"] == 0.0
    m = calculate_metrics([failed("x")], dur_s=1.0)
    assert m["completed"] == 0 and m["mean_ttft_ms"] == 0.0 and m["output_throughput"] == 0.0


def test_goodput_counts_exactly_the_requests_within_ttft_tpot_and_e2el_as_vllm_does():
    slo = SLO(ttft_p99_ms=100, itl_p99_ms=20, tpot_ms=15, e2el_ms=300)
    good = [
        ok(0.05, [0.01, 0.01]), ok(0.1, [0.02, 0.01]),  # on the limits counts as good
        ok(0.05, [0.001] * 10 + [0.03] * 2),  # its own p99 ITL 30 ms: vLLM has no ITL check
    ]
    bad = [
        ok(0.101, [0.01]),                     # TTFT over
        ok(0.05, [0.019, 0.019]),              # TPOT 19 ms over 15 although ITLs fine
        ok(0.09, [0.0145] * 20),               # E2EL 380 ms over
        failed("http_500"),
    ]
    assert [meets_slo(o, slo) for o in good + bad] == [True] * 3 + [False] * 4
    m = calculate_metrics(good + bad, dur_s=4.0, slo=slo)
    assert m["goodput"] == m["request_goodput"] == 0.75
    assert m["request_throughput"] == 1.5


def test_goodput_with_one_objective_ignores_the_others_and_an_itl_limit_changes_nothing():
    outs = [ok(0.05, [0.5]), ok(0.2, [0.001])]  # TPOT 500 / 1 ms, E2EL 550 / 201 ms
    assert calculate_metrics(outs, 1.0, SLO(ttft_p99_ms=100))["goodput"] == 1.0
    assert calculate_metrics(outs, 1.0, SLO(tpot_ms=10))["goodput"] == 1.0
    assert calculate_metrics(outs, 1.0, SLO(e2el_ms=300))["goodput"] == 1.0
    assert calculate_metrics(outs, 1.0, SLO(itl_p99_ms=10))["goodput"] == 2.0
    assert calculate_metrics(outs, 1.0)["goodput"] == 2.0
    for base in (SLO(ttft_p99_ms=100), SLO(tpot_ms=10), SLO(e2el_ms=300)):
        with_itl = dataclasses.replace(base, itl_p99_ms=10)
        assert (calculate_metrics(outs, 1.0, with_itl)["goodput"]
                == calculate_metrics(outs, 1.0, base)["goodput"])


def test_slo_met_judges_the_run_p99s():
    outs = [ok(k / 1000, [0.005]) for k in range(1, 101)]
    assert calculate_metrics(outs, 1.0, SLO(ttft_p99_ms=99.5))["slo_met"] == 1.0
    assert calculate_metrics(outs, 1.0, SLO(ttft_p99_ms=99.0))["slo_met"] == 0.0


def test_simulated_time_conversion_scales_latencies_up_and_throughputs_down():
    m = {"mean_itl_ms": 2.0, "output_throughput": 1000.0, "goodput": 10.0, "completed": 7,
         "duration": 3.0, "p99_ttft_ms": 5.0}
    assert to_simulated_time(m, 10.0) == {"mean_itl_ms": 20.0, "output_throughput": 100.0,
                                          "goodput": 1.0, "completed": 7, "duration": 30.0,
                                          "p99_ttft_ms": 50.0}
    assert to_simulated_time(m, 1.0) == m


def test_noise_compares_the_two_halves_of_the_steady_window():
    # Requests start every 0.1 s for 2 s; tokens every 10 ms in the first second, 20 ms after.
    outs = [ok(0.01, [0.01 if i < 10 else 0.02] * 9, start=i * 0.1) for i in range(20)]
    noise = noise_estimate(outs)
    assert noise["p99_itl_rel_diff"] == pytest.approx(abs(10 - 20) / 15)
    assert noise["output_throughput_rel_diff"] > 0.03
    steady = [ok(0.01, [0.01] * 9, start=i * 0.1) for i in range(20)]
    assert noise_estimate(steady)["p99_itl_rel_diff"] == pytest.approx(0.0)
    assert noise_estimate(steady)["output_throughput_rel_diff"] < 0.1
    assert noise_estimate(outs[:3]) == {}
