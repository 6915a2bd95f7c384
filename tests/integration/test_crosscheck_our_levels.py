"""Our side of the cross-check beside a ladder, on a real simulated server started as a
trial starts one: a level at the asked rate with the round's own prompts, and, once the
server is gone, an error entry instead of an exception that would cost the trial."""

from __future__ import annotations

import os

from tuner.engine.ports import free_port
from tuner.engine.supervisor import Server
from tuner.loadgen.ladder import level_requests
from tuner.runner.plans import compile_trial
from tuner.runner.trial import our_levels
from tuner.storage import load_study_file
from tuner.testing.sim_studies import SIM

CAPACITY = '''
[[objectives]]
metric = "capacity_rps"
direction = "maximize"
[capacity]
reference_rate = 4.0
level_s = 4
'''


def test_our_level_runs_at_the_rate_and_a_dead_server_gives_an_error_entry(study_file,
                                                                            tmp_path):
    spec = load_study_file(study_file(SIM.format(n=16, trials=1, scale=4) + CAPACITY,
                                      "cap.toml"))
    plan = compile_trial(spec, {}, free_port(), (0,), inherited=os.environ)
    server = Server(plan.engine.launch, plan.engine.port, tmp_path / "sim.log")
    server.start()
    try:
        server.wait_healthy(60)
        ours = our_levels(server, plan)
        first, second = ours(3.0, 0), ours(3.0, 1)
    finally:
        server.stop(5)
    for level in (first, second):
        assert "error" not in level, level
        assert level["offered_rps"] == 3.0 and level["requests"] == level_requests(3.0, 4)
        assert level["failed"] == 0 and level["p99_ttft_ms"] > 0
    assert first["p99_ttft_ms"] != second["p99_ttft_ms"]  # two runs, each its own prompts
    gone = ours(3.0, 2)
    assert gone["offered_rps"] == 3.0 and "exited" in gone["error"], gone
