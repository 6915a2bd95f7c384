"""A small Gaussian-process surrogate over an encoded search space (pure numpy).

``Encoding`` maps a configuration to the unit cube: log-scaled numbers on a log scale,
linear numbers linearly, a categorical as its choice's index over (choices - 1).
``fit`` learns a Matern-5/2 process with one length scale per dimension and a noise
variance (no lower than ``noise_floor``) by maximising the marginal likelihood over a
small grid, one dimension at a time; ``GP.predict`` gives the posterior mean and standard
deviation in the data's units, ``GP.covariance`` the posterior covariance between two sets
of points (for draws of several points at once). A few milliseconds for the tens of trials a study has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from optuna.distributions import (BaseDistribution, CategoricalDistribution,
                                  FloatDistribution, IntDistribution)

LENGTHS = (0.1, 0.2, 0.4, 0.8)  # isotropic length scales tried first (unit cube)
SCALES = (0.5, 2.0, 4.0, 30.0)  # then each dimension's multiplier (30: the flag is inert)
PRIOR_LENGTH, PRIOR_LOG_SD = 1.0, 1.0  # a flag matters little until the data show it does
NOISES = (1e-4, 1e-3, 1e-2, 0.05, 0.2)  # noise variances tried (standardised data)


@dataclass(frozen=True)
class Encoding:
    """The unit-cube coordinates of a space's parameters, in ``names`` order."""

    space: Mapping[str, BaseDistribution]

    @property
    def names(self) -> list[str]:
        return sorted(self.space)

    def categorical(self) -> np.ndarray:
        return np.array([isinstance(self.space[n], CategoricalDistribution) for n in self.names])

    def encode(self, params: Mapping[str, Any]) -> np.ndarray:
        return np.array([_to_unit(self.space[n], params[n]) for n in self.names])

    def decode(self, x: np.ndarray) -> dict[str, Any]:
        return {n: _from_unit(self.space[n], float(v)) for n, v in zip(self.names, x)}

    def snap(self, x: np.ndarray) -> np.ndarray:
        """``x`` on the values the space can hold (integers, steps, choices)."""
        return self.encode(self.decode(np.clip(x, 0.0, 1.0)))


def _to_unit(d: BaseDistribution, v: Any) -> float:
    if isinstance(d, CategoricalDistribution):
        k = len(d.choices)
        return d.choices.index(v) / (k - 1) if k > 1 else 0.0
    lo, hi = float(d.low), float(d.high)
    if hi <= lo:
        return 0.0
    if d.log:
        return (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return (float(v) - lo) / (hi - lo)


def _from_unit(d: BaseDistribution, u: float) -> Any:
    u = min(max(u, 0.0), 1.0)
    if isinstance(d, CategoricalDistribution):
        return d.choices[int(round(u * (len(d.choices) - 1)))]
    lo, hi = float(d.low), float(d.high)
    v = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))) if d.log else lo + u * (hi - lo)
    if isinstance(d, IntDistribution):
        step = d.step or 1
        return int(min(max(d.low + round((v - d.low) / step) * step, d.low), d.high))
    if isinstance(d, FloatDistribution) and d.step:
        v = d.low + round((v - d.low) / d.step) * d.step
    return round(min(max(v, lo), hi), 6)


def _matern(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    d = np.sqrt(np.maximum(((a[:, None, :] - b[None, :, :]) / lengths) ** 2, 0.0).sum(-1))
    s = math.sqrt(5.0) * d
    return (1.0 + s + s * s / 3.0) * np.exp(-s)


@dataclass(frozen=True)
class GP:
    """A fitted process: ``predict`` gives (mean, sd) in the data's units."""

    X: np.ndarray
    y: np.ndarray
    lengths: np.ndarray
    noise: float  # variance, standardised units
    chol: np.ndarray
    alpha: np.ndarray
    mean: float
    scale: float

    def predict(self, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = _matern(Xs, self.X, self.lengths)
        mu = k @ self.alpha
        v = np.linalg.solve(self.chol, k.T)
        var = np.maximum(1.0 - (v * v).sum(0), 1e-12)
        return self.mean + self.scale * mu, self.scale * np.sqrt(var)

    def covariance(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """The posterior covariance of the process's values (noise excluded) at ``A`` and
        ``B`` (len(A) x len(B)), in the data's units squared."""
        va = np.linalg.solve(self.chol, _matern(A, self.X, self.lengths).T)
        vb = np.linalg.solve(self.chol, _matern(B, self.X, self.lengths).T)
        return self.scale ** 2 * (_matern(A, B, self.lengths) - va.T @ vb)

    @property
    def noise_sd(self) -> float:
        """The learned noise's standard deviation in the data's units."""
        return self.scale * math.sqrt(self.noise)

    def believing(self, Xs: np.ndarray) -> "GP":
        """The same process told its own mean at ``Xs`` (Kriging believer: trials in flight
        count as measured where the model expects them, so the next proposal goes
        elsewhere)."""
        if len(Xs) == 0:
            return self
        mu, _ = self.predict(Xs)
        X = np.vstack([self.X, Xs])
        y = np.concatenate([self.y, mu])
        return _posterior(X, y, self.lengths, self.noise, self.mean, self.scale)[1]


def _posterior(X, y, lengths, noise, mean, scale) -> tuple[float, GP]:
    """(log marginal likelihood, GP) of standardised ``y`` under the hyperparameters."""
    z = (y - mean) / scale
    k = _matern(X, X, lengths) + (noise + 1e-8) * np.eye(len(X))
    try:
        chol = np.linalg.cholesky(k)
    except np.linalg.LinAlgError:
        return -math.inf, None  # type: ignore[return-value]
    alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, z))
    lml = -0.5 * z @ alpha - np.log(np.diag(chol)).sum()
    # a weak prior: length scales near the cube's size, little noise
    lml -= 0.5 * (np.log(lengths / PRIOR_LENGTH) ** 2).sum() / PRIOR_LOG_SD ** 2
    return float(lml), GP(X, y, lengths, noise, chol, alpha, mean, scale)


def fit(X: np.ndarray, y: np.ndarray, noise_floor: float = 1e-4) -> GP:
    """The process of the best marginal likelihood over the grid (see the module)."""
    mean, scale = float(y.mean()), float(y.std()) or 1.0
    noises = [max(n, noise_floor / scale ** 2) for n in NOISES]
    best, best_lml = None, -math.inf
    for length in LENGTHS:
        for noise in noises:
            lml, gp = _posterior(X, y, np.full(X.shape[1], length), noise, mean, scale)
            if lml > best_lml:
                best, best_lml = gp, lml
    assert best is not None
    lengths = best.lengths.copy()
    for dim in range(X.shape[1]):
        for m in SCALES:
            trial = lengths.copy()
            trial[dim] = min(lengths[dim] * m, 30.0)
            lml, gp = _posterior(X, y, trial, best.noise, mean, scale)
            if lml > best_lml:
                best, best_lml = gp, lml
        lengths = best.lengths.copy()
    return best
