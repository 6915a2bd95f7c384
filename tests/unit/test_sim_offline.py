"""The simulator's offline start and closed-loop replay (``tuner.sim.start_offline``,
``run_closed_loop``): what the in-process tier's engine stands on."""

from pathlib import Path

import pytest

from tuner import sim

MODELS = Path(__file__).resolve().parents[2] / "studies" / "models"


def _start(*flags: str):
    return sim.start_offline(["python", "-m", "tuner.sim", "serve", "--model",
                              str(MODELS / "llama3-8b"), "--gpu", "h200", *flags], {})


def test_an_offline_start_is_the_served_engine_or_its_refusal():
    started = _start("--max-num-seqs", "8")
    assert isinstance(started, sim.OfflineStart)
    assert started.core.cfg.max_num_seqs == 8 and "KV cache" in started.log
    refused = sim.start_offline(["serve", "--model", str(MODELS / "llama3-70b"), "--gpu",
                                 "h200", "--gpu-memory-utilization", "0.5"], {})
    assert isinstance(refused, str) and "No available memory for the cache blocks" in refused


def test_a_closed_loop_keeps_its_clients_busy_and_no_more():
    core = _start().core
    run = sim.run_closed_loop(core, 2, [64] * 6, [4] * 6)
    assert len(run.ttfts) == 6 and all(len(itl) == 3 for itl in run.itls)
    assert run.starts[:2] == (0.0, 0.0) and all(s > 0 for s in run.starts[2:])
    assert run.output_tokens == 24 and run.duration_s >= max(run.starts)
    one = sim.run_closed_loop(_start().core, 1, [64] * 3, [4] * 3)
    ends = [s + t + sum(i) for s, t, i in zip(one.starts, one.ttfts, one.itls)]
    # one client: each request is sent when the last one finished
    assert one.starts[1:] == pytest.approx(ends[:-1])
    with pytest.raises(ValueError):
        sim.run_closed_loop(core, 0, [1], [1])
