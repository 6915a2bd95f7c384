"""A load ladder against the simulator (`python -m tuner.sim serve`, a real subprocess on
loopback, simulated time running fast): the curve it records holds together."""

from __future__ import annotations

import asyncio

import pytest

from tuner.loadgen import SLO, LoadSpec, WorkloadSpec, run_benchmark
from tuner.capacity.run import level_load, level_of, run_ladder
from tuner.loadgen.ladder import LadderPlan
from tuner.sim.openloop import engine_core, run_open_loop
from tuner.sim.serveargs import parse_engine_flags
from tuner.testing.sim_server import MODEL_NAME, sim_server

pytestmark = pytest.mark.integration
TIME_SCALE = 8.0
# The simulated L4's p99 ITL is flat in the rate below saturation, and its 40-s levels
# queue too little for their TTFT to bind: these SLOs hold below the saturated rate on a
# quiet machine. Time runs TIME_SCALE times faster here, so a stall of a busy machine
# counts that many times over: the ITL limit leaves the server room over its own p99 (a
# limit at its p99 failed levels at every rate; docs/decisions/0039).
SLOS = SLO(ttft_p99_ms=2000.0, itl_p99_ms=400.0)
TOLERANCE = LadderPlan().tolerance  # the ladder below runs with it


WORKLOAD = WorkloadSpec(input_len=512, output_len=64, vocab_size=128256)
CLOSED_LOOP = LoadSpec(max_concurrency=32, num_requests=100, warmup_requests=8,
                       max_client_lag_ms=50.0)


@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    """One ladder on a simulated L4 (slow enough that a small machine keeps up)."""
    calls: list[tuple[int, int, float]] = []
    with sim_server(tmp_path_factory.mktemp("sim"), "--gpu", "l4",
                    time_scale=TIME_SCALE) as url:
        run = asyncio.run(run_ladder(
            url, MODEL_NAME, WORKLOAD, CLOSED_LOOP, SLOS, LadderPlan(max_levels=5), level_s=40.0, time_scale=TIME_SCALE,
            on_level=lambda k, n, rate: calls.append((k, n, rate))))
    return run, calls


def test_progress_names_every_level_before_it_runs(ladder):
    run, calls = ladder
    assert [c[0] for c in calls] == list(range(1, len(run.curve.levels) + 1))
    assert all(n == 5 for _, n, _ in calls)
    assert [c[2] for c in calls] == [lv.offered_rps for lv in run.curve.levels]
    assert run.curve.saturated_rps == pytest.approx(run.warmup.metrics["request_throughput"])


def test_a_level_holds_exactly_when_the_slos_verdict_on_it_holds(ladder):
    """The curve keeps the SLO its levels were judged at; a level holds when that SLO's one
    verdict holds (its steady requests' p99s in server time, where it had a steady window,
    and its backlog within the tolerance), the run measured the server and no request
    failed. A level stopped once its miss was certain never holds."""
    run, _ = ladder
    slo = run.curve.own_slo
    assert slo == SLOS.judged(TOLERANCE)
    for lv in run.curve.levels:
        verdict = lv.verdict(slo)
        assert lv.held == (verdict.held and lv.failed == 0 and lv.invalid_reason is None
                           and not lv.stopped_early), lv
        assert lv.margins == verdict.to_json(), lv
        assert {"p99_ttft_ms", "p99_itl_ms"} <= set(lv.margins), lv
        assert 0.0 <= lv.slo_attainment <= 1.0


def test_the_achieved_rate_tracks_the_offered_rate_below_capacity(ladder):
    run, _ = ladder
    # levels that measured the server, whole (not a client that lagged on a busy machine,
    # nor a level stopped on a certain miss, which sent only part of its arrivals)
    below = [lv for lv in run.curve.levels if lv.offered_rps <= run.curve.capacity_rps
             and lv.invalid_reason is None and not lv.stopped_early]
    assert below, "no level held: the test's SLOs no longer suit the simulated L4"
    for lv in below:  # a Poisson count over ~40 s at a few requests/s: within 30 %
        assert 0.7 <= lv.achieved_rps / lv.offered_rps <= 1.3, lv


def test_the_capacity_lies_between_the_levels_that_bracket_it(ladder):
    """The capacity is the fitted crossing, within its interval, between the highest level
    below it that held and the lowest above it that missed; never past the highest
    measured level (all held: censored at it)."""
    curve = ladder[0].curve
    est = curve.estimate()
    usable = [lv for lv in curve.measured if lv.usable]
    assert est.lower <= curve.capacity_rps == est.point <= est.upper, est
    assert curve.capacity_rps <= usable[-1].offered_rps
    assert any(lv.held and lv.offered_rps <= curve.capacity_rps for lv in usable), curve
    if est.censored:
        assert curve.capacity_rps == usable[-1].offered_rps and all(lv.held for lv in usable)
    else:
        assert not all(lv.held for lv in usable), curve
    if curve.verdict == "bracketed":
        assert est.width <= LadderPlan().width and not est.censored
    else:
        assert curve.verdict in ("budget", "none-held"), curve.verdict
    # the saturated warm-up queues its prompts; no open-loop level below the saturated
    # rate waits as long (below the knee a level's p99 TTFT is near-flat in the rate, so
    # comparing two levels with each other would compare noise; above it, where the
    # ladder steps once a level held near it, a level may queue more). Only levels that
    # measured the server, whole: a level whose client lagged (a busy machine) measured
    # the client, and a level stopped on a certain miss reads whichever requests were in
    # flight. A level's p99 TTFT is the one it was judged on, over its steady requests:
    # over the whole run, a held level near capacity on a loaded machine has read more
    # than the warm-up while its steady requests read far less.
    warmup_ttft = ladder[0].warmup.metrics["p99_ttft_ms"]
    whole = [lv for lv in curve.measured if lv.invalid_reason is None and not lv.stopped_early
             and lv.offered_rps < curve.saturated_rps]
    assert any(lv.held for lv in whole), curve
    assert all(lv.judged_p99_ttft_ms < warmup_ttft for lv in whole), (warmup_ttft, curve)
    # the figures at the capacity come from the measured levels around it, never past them
    itl = curve.at("judged_p99_itl_ms", curve.capacity_rps)
    read = [lv for lv in curve.measured if not lv.stopped_early]
    below = [lv.judged_p99_itl_ms for lv in read if lv.offered_rps <= curve.capacity_rps]
    above = [lv.judged_p99_itl_ms for lv in read if lv.offered_rps >= curve.capacity_rps]
    if below and above:
        assert min(below[-1], above[0]) <= itl <= max(below[-1], above[0]), (itl, curve)
    else:
        assert itl is None


def _misses(level) -> bool:
    """The whole run's figures (server time) miss an SLO, or a request failed."""
    return bool(level.failed or level.p99_ttft_ms > SLOS.ttft_p99_ms
                or level.p99_itl_ms > SLOS.itl_p99_ms)


def _engine_bound_rps(n: int = 300) -> float:
    """The simulated L4's most requests a second at its default flags (server time): ``n``
    of the workload's requests all arriving at once, replayed offline on the engine core
    the served simulator runs. No host's load enters it, and the served simulator, with
    HTTP and a clock, can only be slower."""
    core = engine_core(parse_engine_flags([]), "l4")
    run = run_open_loop(core, [0.0] * n, [WORKLOAD.input_len] * n, [WORKLOAD.output_len] * n)
    return n / run.duration_s


def test_a_level_past_capacity_stops_once_its_miss_is_certain(ladder, tmp_path):
    """At twice the engine's own bound the queue grows without bound: with
    ``stop_on_miss`` the level stops sending before its schedule ends, and its own figures
    already miss the SLOs, certainly by the SLO's verdict; run whole on the same server,
    the level misses them too, as certainly. (The ladder's saturated rate is no such
    bound: its warm-up keeps 32 requests in flight, and the engine serves more at once.
    Nor does the ladder come near the rate: it places its levels at the fitted crossing,
    below the saturated rate, and past it only ``ceiling_step`` above a level that held.)"""
    rate = 2 * _engine_bound_rps()
    curve = ladder[0].curve
    assert rate > 2 * curve.saturated_rps
    assert rate > LadderPlan().ceiling_step * max(lv.offered_rps for lv in curve.levels)
    slo = curve.own_slo
    load = level_load(CLOSED_LOOP, rate, 40.0, TIME_SCALE)
    with sim_server(tmp_path, "--gpu", "l4", time_scale=TIME_SCALE) as url:
        runs = [asyncio.run(run_benchmark(url, MODEL_NAME, WORKLOAD, load, slo=SLOS,
                                          time_scale=TIME_SCALE, stop_on_miss=stop))
                for stop in (True, False)]
    stopped, whole = (level_of(rate, r, slo) for r in runs)
    assert runs[0].stop_reason == "missed" and stopped.stopped_early and not stopped.held
    assert stopped.requests < load.num_requests, stopped
    assert _misses(stopped), stopped
    verdict = stopped.verdict(slo)
    assert not verdict.held and verdict.certain, verdict
    # the fit takes it as a miss with no upper end: a shortened run bounds it from below
    point = stopped.point(slo)
    assert point.value > 1.0 and point.upper == float("inf"), point
    assert runs[1].stop_reason == "count" and whole.stopped_early is None
    assert whole.requests == load.num_requests and not whole.held and _misses(whole), whole
    verdict = whole.verdict(slo)
    assert not verdict.held and verdict.certain, verdict
