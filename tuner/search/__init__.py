"""Search-side choices that the benchmark measured (``make bench-search``): how a study
asks for configurations, apart from which sampler it uses.

    plan = PLANS["auto"]                         # the default: what won the benchmark
    sampler = plan.sampler_for(seed)
    warm_start(study, space)                     # the default + the article's launches first
    FrontSampler(FrontSettings.for_study(spec))  # probes, then EHVI under a GP (the default)
    LocalSampler(base, seed)                     # the previous default: pattern moves

Nothing here imports the simulator: the search learns from told trials only.
"""

from tuner.search.front import FrontSampler, FrontSettings
from tuner.search.local import LocalSampler
from tuner.search.plan import PLANS, SearchPlan
from tuner.search.warm import warm_start

__all__ = ["PLANS", "FrontSampler", "FrontSettings", "LocalSampler", "SearchPlan", "warm_start"]
