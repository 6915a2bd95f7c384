"""Each objective's output transform: the Box-Cox power its process is fitted on.

A throughput that saturates (most trials close to one ceiling, a few far below) is skewed
on a log scale, and the log's long upper tail lets candidates the model knows little about
draw throughputs far above anything measured, worth much hypervolume. Box and Cox (1964)
choose the power by the likelihood, the transform's Jacobian counted (the output warping
of a warped GP, Snelson et al., 2004, with one parameter); here over their named powers:
the reciprocal, the log, the square root, the values as they are and their square. Which
power each benchmark profile takes: docs/decisions/0007-trust-region-and-box-cox.md.
"""

from __future__ import annotations

import math

import numpy as np

from tuner.search.surrogate import GP, fit

POWERS = (-1.0, 0.0, 0.5, 1.0, 2.0)


def box_cox(v: np.ndarray, power: float) -> np.ndarray:
    """Positive ``v`` on the Box-Cox scale of ``power`` (0: the log)."""
    return np.log(v) if power == 0 else (v ** power - 1.0) / power


def inverse(z: np.ndarray, power: float) -> np.ndarray:
    """``box_cox``'s inverse (values past the transform's range held at its edge)."""
    if power == 0:
        return np.exp(z)
    return np.maximum(power * z + 1.0, 1e-12) ** (1.0 / power)


def relative(sd: float, typical: float, power: float) -> float:
    """A spread ``sd`` on the scale of ``power`` as a relative one near ``typical``
    (dz = v^(power - 1) dv)."""
    return sd / typical ** power


def fit_power(X: np.ndarray, v: np.ndarray, spread: float = 0.0,
              cells: np.ndarray | None = None) -> tuple[GP, float]:
    """The process of positive values ``v`` on the Box-Cox power (of ``POWERS``) of the best
    likelihood, the Jacobian counted: (process on that scale, power). ``spread``: the
    measured relative spread, the noise floor (as on the log scale)."""
    typical = float(np.median(v))
    best, best_ll, best_power = None, -math.inf, 0.0
    for power in POWERS:
        z = box_cox(v, power)
        gp = fit(X, z, noise_floor=(spread * typical ** power) ** 2, cells=cells)
        ll = gp.log_likelihood() + (power - 1.0) * float(np.log(v).sum())
        if ll > best_ll:
            best, best_ll, best_power = gp, ll, power
    assert best is not None
    return best, best_power
