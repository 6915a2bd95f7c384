"""Capacity under SLOs: a load ladder on one server, recorded as the trial's curve.

    from tuner.capacity import run_ladder
    run = await run_ladder(url, model, workload, closed_loop, slo, LadderPlan())
    run.curve.capacity_rps

The ladder's choice of rates is pure (``tuner.loadgen.ladder``); the curve and what it
implies are the trial's part (``tuner.trials.curve``); this package drives the runs.
"""

from tuner.capacity.run import LadderRun, run_ladder

__all__ = ["LadderRun", "run_ladder"]
