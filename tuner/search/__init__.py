"""Search-side choices that the benchmark measured (``make bench-search``): how a study
asks for configurations, apart from which sampler it uses.

    plan = PLANS["auto"]                         # the default: what won the benchmark
    sampler = plan.sampler_for(seed)
    warm_start(study, space)                     # the default + the article's launches first
    LocalSampler(base, seed)                     # probes around the default, then local moves

Nothing here imports the simulator: the search learns from told trials only.
"""

from tuner.search.local import LocalSampler
from tuner.search.plan import PLANS, SearchPlan
from tuner.search.warm import warm_start

__all__ = ["PLANS", "LocalSampler", "SearchPlan", "warm_start"]
