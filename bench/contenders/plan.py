"""A search plan: the sampler and the choices around it that the benchmark compares
(``make_sampler``'s names, and ``local``: the previous default, ``contenders.local``)."""

from __future__ import annotations

from dataclasses import dataclass

import optuna

from contenders.local import LocalSampler
from tuner.search.sampler import AUTO, make_sampler


@dataclass(frozen=True)
class SearchPlan:
    """``sampler``: a name ``make_sampler`` knows; ``n_startup_trials``: random trials
    before the model (the baselines count when warm-started); ``warm_start``: enqueue the
    baselines first; ``constraints``: tell ``starts`` / SLO constraints so that the sampler
    learns the infeasible region; ``constant_liar``: running trials count as bad
    (batch-aware proposals for parallel workers)."""

    sampler: str
    n_startup_trials: int = 10
    warm_start: bool = False
    constraints: bool = True
    constant_liar: bool = True

    def sampler_for(self, seed: int | None, front=None) -> optuna.samplers.BaseSampler:
        """``front``: the study's ``FrontSettings`` (the front sampler's score); ``local``:
        the previous default's moves around TPE."""
        if self.sampler == "local":
            return LocalSampler(make_sampler("tpe", seed, self.n_startup_trials,
                                             constant_liar=self.constant_liar), seed=seed)
        return make_sampler(self.sampler, seed, self.n_startup_trials,
                            constant_liar=self.constant_liar, front=front)


# What a study does (``tuner study create`` enqueues the baselines; the runner tells
# constraints; ``auto`` is the front sampler, tuner/search/front/): docs/search.md.
PLANS: dict[str, SearchPlan] = {
    "auto": SearchPlan(AUTO, n_startup_trials=8, warm_start=True),
}
