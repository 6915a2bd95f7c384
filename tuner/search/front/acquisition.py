"""Expected hypervolume improvement in one to three objectives, by Monte Carlo (pure numpy).

Everything is minimised. ``improvement`` is the exact hypervolume a point adds to a front up
to a reference (the volume it dominates that the front does not), vectorised over many
points: in two objectives a staircase of areas; in three, boxes of the region the front
does not dominate (Optuna's box decomposition, as its GPSampler computes EHVI); in one, the
length by which the point beats the front's best (or the reference), which is the plain
improvement of expected improvement. ``expected_improvement`` averages it over samples
drawn from the surrogate's posterior (common random numbers, so candidates compare on the
same draws);
``end_improvement`` scores how far a candidate pushes one end of the front.

The front is drawn with the candidates (``joint_draws``): the measured points' values are
noisy, so the front is a posterior draw of the processes at the measured configurations,
and each candidate's draw is conditioned on it (the noisy expected hypervolume improvement
of Daulton et al., 2021). A candidate the model finds correlated with a front point moves
with it in every draw, so re-measuring a configuration that the model expects to behave as
one already measured gains nothing, however noisy the measurements were (drawn apart
from the front at its measured values, such a candidate seemed to gain whenever its draw
beat the point's value, and many trials measured an earlier trial's values again).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from tuner.optuna_adapter import non_dominated_boxes
from tuner.search.front.model import Objectives

JITTER = 1e-9  # the front's covariance gets this share of its scale: a Cholesky factor exists
TINY = 1e-12  # the least scale of that covariance, for a front of points the model is sure of


def staircase(front: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The non-dominated points of ``front`` (n x 2) inside ``ref``, by the first
    objective ascending (the second then descends)."""
    pts = front[(front[:, 0] < ref[0]) & (front[:, 1] < ref[1])] if len(front) else front
    out, best = [], math.inf
    for p in pts[np.lexsort((pts[:, 1], pts[:, 0]))] if len(pts) else []:
        if p[1] < best:
            out.append(p)
            best = p[1]
    return np.array(out).reshape(-1, 2)


def improvement(points: np.ndarray, front: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Hypervolume each of ``points`` (... x d) adds to ``front`` (n x d) up to ``ref``;
    d is 1, 2 or 3."""
    dims = points.shape[-1]
    if dims == 1:
        return np.maximum(0.0, _best(front, ref, 0) - points[..., 0])
    if dims == 3:
        return _improvement_boxes(points, front, ref)
    stair = staircase(front, ref)
    lefts = np.concatenate([[-np.inf], stair[:, 0]])
    rights = np.concatenate([stair[:, 0], [ref[0]]])
    heights = np.concatenate([[ref[1]], stair[:, 1]])
    x, y = points[..., 0:1], points[..., 1:2]
    width = np.maximum(0.0, rights - np.maximum(lefts, x))
    height = np.maximum(0.0, np.minimum(heights, ref[1]) - y)
    return (width * height).sum(-1)


def _best(front: np.ndarray, ref: np.ndarray, axis: int) -> float:
    """The front's best value on ``axis`` among its points whose other objectives stay
    inside ``ref``, capped at the reference."""
    others = np.arange(front.shape[-1]) != axis
    inside = front[(front[:, others] < ref[others]).all(-1)] if len(front) else front
    return min(ref[axis], inside[:, axis].min()) if len(inside) else ref[axis]


def _improvement_boxes(points: np.ndarray, front: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``improvement`` in any number of objectives: the part of each point's box up to
    ``ref`` that lies in the region no point of ``front`` dominates, that region cut into
    boxes by Optuna's box decomposition."""
    inside = front[(front < ref).all(-1)] if len(front) else front
    if len(inside):
        lower, upper = non_dominated_boxes(inside, ref)
    else:
        lower, upper = np.full((1, len(ref)), -np.inf), ref[None, :]
    sides = np.maximum(0.0, upper - np.maximum(lower, points[..., None, :]))
    return sides.prod(-1).sum(-1)


def joint_draws(mean_f: np.ndarray, cov_ff: np.ndarray, mean_c: np.ndarray,
                cov_fc: np.ndarray, var_c: np.ndarray, z_f: np.ndarray,
                z_c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Draws of one process at a front's points and at candidates, jointly: (k x nf, k x nc).

    ``mean_f``, ``cov_ff``: the posterior at the front's nf points; ``mean_c``, ``var_c``:
    at the nc candidates; ``cov_fc``: between them (nf x nc); ``z_f`` (k x nf), ``z_c``
    (k x 1 or k x nc): standard normals. Each candidate's draw is conditioned on the front's
    draw (a candidate fully correlated with a front point draws that point's value)."""
    if len(mean_f) == 0:
        return np.zeros((len(z_f), 0)), mean_c + np.sqrt(np.maximum(var_c, 0.0)) * z_c
    jitter = JITTER * max(float(np.mean(np.diag(cov_ff))), TINY) * np.eye(len(mean_f))
    chol = np.linalg.cholesky(cov_ff + jitter)
    front = mean_f + z_f @ chol.T
    w = np.linalg.solve(chol, cov_fc)  # nf x nc: chol^-1 cov_fc
    cond = np.maximum(var_c - (w * w).sum(0), 0.0)
    # E[c | f] = mean_c + cov_cf cov_ff^-1 (f - mean_f) = mean_c + w^T chol^-1 (f - mean_f)
    return front, mean_c + z_f @ w + np.sqrt(cond) * z_c


def expected_improvement(draws: np.ndarray, fronts: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Mean hypervolume improvement per candidate over its posterior ``draws`` (k x n x 2),
    each over the front drawn with it (``fronts``: k x m x 2)."""
    return np.mean([improvement(d, f, ref) for d, f in zip(draws, fronts)], axis=0)


def end_improvement(draws: np.ndarray, fronts: np.ndarray, ref: np.ndarray,
                    axis: int) -> np.ndarray:
    """Mean improvement on objective ``axis`` alone over the front's best there, counted
    only where the other objectives stay inside the reference: how far a candidate
    pushes that end of the front (each draw over the front drawn with it)."""
    others = np.arange(draws.shape[-1]) != axis
    gains = []
    for d, front in zip(draws, fronts):
        best = _best(front, ref, axis)
        gains.append(np.maximum(0.0, best - d[:, axis]) * (d[:, others] < ref[others]).all(-1))
    return np.mean(gains, axis=0)


def choose(gain: np.ndarray, pf: np.ndarray, sd: np.ndarray, any_feasible: bool,
           nudge: float, fallback: bool = True) -> int:
    """The candidate to propose: the largest expected improvement times the probability of
    feasibility ``pf``; while no measured trial is feasible, or where nothing is expected
    to add, the likeliest to be feasible (``sd``, the posterior spread weighed by
    ``nudge``, breaks ties). With an empty front the improvement is the whole box a
    candidate dominates, so the product would favour a large box at long odds over a
    likely feasible point (Optuna's constrained GPSampler also drops the improvement then;
    Gelbart et al., 2014). ``fallback`` False: always the product
    (``FrontSettings.feasible_first`` off)."""
    score = pf * gain
    if fallback and (not any_feasible or score.max() <= 0):
        score = pf + nudge * sd
    return int(np.argmax(score))


def aim(moves: Sequence[Mapping[str, Any]], count: int, ends: int) -> str:
    """What this model proposal maximises: the expected hypervolume improvement
    (``ehvi``), or, one model proposal in ``ends`` (counted over the earlier ``moves``),
    one end of the front (``end:0``, then ``end:1``, ..., in turn: the front is covered
    from both ends, where a point adds little volume but answers a user's tightest
    limit); with one objective its expected improvement (``ei``: the front has no ends);
    ``ends`` 0: never an end."""
    if count == 1:
        return "ei"
    if ends <= 0:
        return "ehvi"
    n = sum(1 for m in moves if m.get("kind") == "model")
    if n % ends != ends - 1:
        return "ehvi"
    return f"end:{(n // ends) % count}"


def gain(goal: str, draws: np.ndarray, fronts: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Each candidate's score under ``goal`` (``aim``)."""
    if goal.startswith("end"):
        return end_improvement(draws, fronts, ref, int(goal[-1]))
    return expected_improvement(draws, fronts, ref)


def posterior_draws(objs: Objectives, at: np.ndarray,
                    cands: np.ndarray, preds, k: int, rng: np.random.Generator,
                    joint: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``k`` posterior draws of the front (the processes at ``at``) and of the candidates
    (``preds``: each process's mean and sd there), jointly (``joint_draws``): (k x points
    x d, k x candidates x d; d objectives), minimised. ``joint`` False: the front at the
    processes' means, each candidate drawn apart from it (``FrontSettings.joint_front``)."""
    normal = np.random.default_rng(rng.integers(2 ** 32))
    d = len(objs.gps)
    z_f, z_c = normal.standard_normal((d, k, len(at))), normal.standard_normal((d, k, 1))
    fronts, draws = [], []
    for j, (gp, (mean_c, sd_c)) in enumerate(zip(objs.gps, preds)):
        mean_f, _ = gp.predict(at)
        if joint:
            f, c = joint_draws(mean_f, gp.covariance(at, at), mean_c,
                               gp.covariance(at, cands), sd_c ** 2, z_f[j], z_c[j])
        else:
            f, c = np.broadcast_to(mean_f, (k, len(at))), mean_c + sd_c * z_c[j]
        fronts.append(f)
        draws.append(c)
    return objs.minimised(np.stack(fronts, -1)), objs.minimised(np.stack(draws, -1))
