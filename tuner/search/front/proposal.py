"""One proposal: the next probe (``probes``) while one is left, else the model's.

The model's proposal, once ``min_trials`` trials are measured: one Gaussian process per
objective and one of feasibility (``model``); candidates in a trust region around the
measured front (``candidates``); each scored by its expected
hypervolume improvement over the study's reference point (``tuner.trials.reference``: the
whole front the SLOs allow), drawn jointly with the front, times its probability of
feasibility; one proposal in ``ends`` instead pushes one end of the front
(``acquisition``). The front's points are the feasible measured trials and those in flight
(at the model's own prediction: Kriging believer), so parallel workers' next proposals go
elsewhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tuner.search.front.acquisition import aim, choose, gain, posterior_draws
from tuner.search.front.candidates import candidates, weights
from tuner.search.front.history import History, feasible, started
from tuner.search.front.model import any_feasible, feasibility, in_flight, objectives
from tuner.search.front.probes import probe
from tuner.search.front.settings import FrontSettings

Proposal = tuple[dict[str, Any], dict[str, Any]]  # (params, move)


def propose(h: History, s: FrontSettings, rng: np.random.Generator,
            seed: int | None) -> Proposal | None:
    """The next probe, else the model's proposal; None when neither has one (Optuna then
    samples at random)."""
    return probe(h, s, seed) or by_model(h, s, rng)


def by_model(h: History, s: FrontSettings, rng: np.random.Generator) -> Proposal | None:
    """The candidate of the largest acquisition (see the module); None before
    ``min_trials`` measured trials or when no candidate is fresh."""
    if len(h.measured) < s.min_trials:
        return None
    running = in_flight(h, s)
    objs = objectives(h, s, running)
    feas = feasibility(h, s, running)
    cands = candidates(h, s, rng, weights([gp.lengths for gp in objs.gps]))
    if not len(cands):
        return None
    ok = np.array([feasible(t) for t in h.measured], bool)
    at = np.vstack([h.measured_x[ok], running])  # the front's points: feasible, in flight
    preds = [gp.predict(cands) for gp in objs.gps]  # (mean, sd) of each objective
    fronts, draws = posterior_draws(objs, at, cands, preds, s.draws, rng, s.joint_front)
    goal = aim(h.moves, h.count, s.ends if s.end_pushes else 0)
    gains = gain(goal, draws, fronts, reference(h, s))
    sd = np.stack([p[1] for p in preds], 1)
    pf = feas(cands)
    best = choose(gains, pf, sd.sum(1), any_feasible(h), s.nudge, s.feasible_first)
    return h.enc.decode(cands[best]), {"kind": "model", "aim": goal,
                                       "gain": float(gains[best]),
                                       "feasible": float(pf[best])}


def reference(h: History, s: FrontSettings) -> np.ndarray:
    """The study's reference point, minimised (``tuner.trials.reference``; from the
    default's values when it started)."""
    default = tuple(h.default.values) if h.default is not None and started(
        h.default) else None
    return h.minimised(np.array(s.reference.point(default), float))
