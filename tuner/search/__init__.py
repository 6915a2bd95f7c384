"""How a study asks for configurations: the default sampler and the choice of another.

    warm_start(study, space)                     # the default + the article's launches first
    FrontSampler(FrontSettings.for_study(spec))  # probes, then EHVI under GPs (the default)
    make_sampler(name, seed, front=settings)     # tuner.search.sampler: the study's choice

Nothing here imports the simulator, the runner or storage: the search learns from told
trials only. Samplers kept only to compare against live in bench/contenders/.
"""

from tuner.search.front import FrontSampler, FrontSettings
from tuner.search.warm import warm_start

__all__ = ["FrontSampler", "FrontSettings", "warm_start"]
