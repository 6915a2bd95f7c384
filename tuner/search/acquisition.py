"""Expected hypervolume improvement in two objectives, by Monte Carlo (pure numpy).

Everything is minimised. ``improvement`` is the exact 2-D hypervolume a point adds to a
front up to a reference (the area it dominates that the front does not), vectorised over
many points; ``expected_improvement`` averages it over samples drawn from the surrogate's
posterior (common random numbers, so candidates compare on the same draws);
``end_improvement`` scores how far a candidate pushes one end of the front.
"""

from __future__ import annotations

import math

import numpy as np


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
    """Hypervolume each of ``points`` (... x 2) adds to ``front`` up to ``ref``."""
    stair = staircase(front, ref)
    lefts = np.concatenate([[-np.inf], stair[:, 0]])
    rights = np.concatenate([stair[:, 0], [ref[0]]])
    heights = np.concatenate([[ref[1]], stair[:, 1]])
    x, y = points[..., 0:1], points[..., 1:2]
    width = np.maximum(0.0, rights - np.maximum(lefts, x))
    height = np.maximum(0.0, np.minimum(heights, ref[1]) - y)
    return (width * height).sum(-1)


def samples(mean: np.ndarray, sd: np.ndarray, draws: np.ndarray, transform) -> np.ndarray:
    """Posterior draws (k x n x 2) of candidates whose surrogate values are ``mean`` +-
    ``sd`` (n x 2), for ``draws`` (k x 2 standard normals, common to all candidates);
    ``transform`` maps surrogate values to the minimised objectives."""
    return transform(mean[None, :, :] + sd[None, :, :] * draws[:, None, :])


def expected_improvement(draws: np.ndarray, front: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Mean hypervolume improvement per candidate over its posterior ``draws``."""
    return improvement(draws, front, ref).mean(0)


def end_improvement(draws: np.ndarray, front: np.ndarray, ref: np.ndarray,
                    axis: int) -> np.ndarray:
    """Mean improvement on objective ``axis`` alone over the front's best there, counted
    only where the other objective stays inside the reference: how far a candidate
    pushes that end of the front."""
    other = 1 - axis
    inside = front[front[:, other] < ref[other]]
    best = min(ref[axis], inside[:, axis].min()) if len(inside) else ref[axis]
    gain = np.maximum(0.0, best - draws[..., axis]) * (draws[..., other] < ref[other])
    return gain.mean(0)
