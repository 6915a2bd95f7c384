"""Probes around vLLM's defaults, then pattern moves along the measured Pareto front.

A study's score is its gain over vLLM's defaults, so the region around the default
configuration matters most. ``LocalSampler`` proposes the first of these that gives a
configuration not asked yet (``contenders.proposer``; ``LocalSettings.order``):

1. **extend**: a numeric move that gained, repeated from where it landed (the same factor
   on a log scale, the same step on a linear one: a pattern search);
2. **mirror**: the opposite of a numeric probe that beat the default, from the same
   parent (the front runs both ways from a point, and a response need not be monotonic);
3. **shrink**: half of a probe's or extension's move that did not gain (traded, lost
   both, or did not start), from its parent that gains: a compass search, and a bracket's
   midpoint where the response is jagged; the one whose interpolated midpoint loses least
   to the default first, none that would lose more than 20%;
4. **fill**: the midpoint of two neighbours on the front that differ in numbers only,
   the widest gap first, while a point there could add 1% of the hypervolume (the front
   between measured points is a staircase);
5. **probes**: the tuning guides' moves (``contenders.steps.PROBES``): an fp8 KV cache,
   half and twice the token budget, chunked prefill and prefix caching flipped, fewer
   sequences, an eighth of the budget and of the sequences (the low-latency corner), less
   memory, a larger block. From the default while no trial gains over it; then from the
   trial that gains most (the default's remaining probes wait). A probe that measured
   exactly the values of a trial differing in its own flags only is inert and not probed
   again; a one-flag probe along a line already measured (a trial between the centre and
   the probe, the rest equal) is not made;
6. with probability ``local_share`` a **local** move of one to three flags from a front
   point (drawn by its share of the hypervolume above the default), else the base
   sampler's proposal (TPE: the global view, and the constraints it learns from).

Every move starts from the flags a trial ran with (its ``flags`` user attribute, what the
rule set repaired its parameters to), not from the parameters it was asked with: a move
from a value the rules overrode would be repaired back to the same configuration. Where
chunked prefill is off and the budget equals max-model-len (the rules tie them), a budget
factor scales both. A configuration already asked, or within 2% of one on every number
(measured, running or refused; as asked or as run), is never proposed again, so repairs and
duplicates cost no trial. A one-flag factor probe that changed nothing marks a flat stretch
(max-num-seqs above the requests in flight): later factors on that flag start from the
stretch's end, where it binds. A trial that measured exactly the values of an earlier one (it
moved inert flags) is not on the front: moving on from it would repeat the earlier one's
moves. Trials that did not start (``starts`` > 0) are never moved from. Nothing here
knows the engine: only the default baseline's flags and the told values (each proposal's
move is kept in the trial's system attribute ``local:move``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import TrialState

from tuner import optuna_adapter
from contenders.proposer import MOVE, LocalSettings, Proposer, pareto
from contenders.steps import PROBES
from tuner.trials.queries import started

__all__ = ["LocalSampler", "MOVE", "PROBES", "pareto", "started"]


class LocalSampler(optuna.samplers.BaseSampler):
    """Pattern, compass, fill and probe moves, local moves, mixed with ``base`` (see the
    module)."""

    order = ("extend", "mirror", "shrink", "fill", "probe")  # the deterministic moves

    def __init__(self, base: optuna.samplers.BaseSampler, seed: int | None = None,
                 local_share: float = 0.6, probes: Sequence = PROBES) -> None:
        self._base = base
        self._rng = np.random.RandomState(seed)
        self._settings = LocalSettings(self.order, local_share, tuple(probes))

    # optuna's sampler protocol ------------------------------------------------------
    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return optuna.search_space.intersection_search_space(
            study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        if not search_space:
            return {}
        trials = study.get_trials(deepcopy=False)
        # Parallel workers: the local moves are deterministic, so workers asking at the same
        # moment would run the same configuration side by side; while another trial is in
        # flight, TPE (own seed per worker, constant liar) proposes a distinct one.
        alone = not any(t.state == TrialState.RUNNING and t.number != trial.number
                        for t in trials)
        proposal = Proposer(self._settings, self._rng, trials, study.directions,
                            search_space).propose() if alone else None
        if proposal is not None:
            params, move = proposal
            optuna_adapter.set_trial_system_attr(study, trial, MOVE, move)
            return params
        return self._base.sample_relative(
            study, trial, self._base.infer_relative_search_space(study, trial))

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        return self._base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial) -> None:
        self._base.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self._base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._rng.seed()
        self._base.reseed_rng()
