"""The objective and feasibility models: Gaussian processes (``tuner.search.front.gp``) on
each objective's Box-Cox power, and on whether a configuration starts and meets each SLO.

**Objectives** (``objectives``). A throughput that saturates (most trials close to one
ceiling, a few far below) is skewed on a log scale, and the log's long upper tail lets
candidates the model knows little about draw throughputs far above anything measured,
worth much hypervolume. Box and Cox (1964) choose the power by the likelihood, the
transform's Jacobian counted (the output warping of a warped GP, Snelson et al., 2004,
with one parameter); here over their named powers (``POWERS``): the reciprocal, the log,
the square root, the values as they are and their square. Which power each benchmark
profile takes: docs/decisions/0007-trust-region-and-box-cox.md. The data are the measured
trials and their echoes (``History.echoes``), each echo with its trial's values; trials in
flight are told to each process at its own mean (Kriging believer).

**Noise.** Each process learns its noise; the trials' measured relative spread
(confirmation runs, ``measured_spread``) is its floor. The acquisition draws the front
jointly with each candidate (noisy EHVI), so a gain on noise is worth nothing there.

**Feasibility** (``feasibility``): P(started) x P(every SLO met): one process of +1/-1
(started or not) over every told trial, so configurations that do not start teach it too,
and one per SLO constraint over the started ones (its value, limit subtracted, on a signed
log scale), so a study whose trials all miss an SLO still learns which way it gets met.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tuner.search.front.gp import GP, fit
from tuner.search.front.history import History, feasible, record_of, started
from tuner.search.front.settings import STARTS, FrontSettings

POWERS = (-1.0, 0.0, 0.5, 1.0, 2.0)  # Box and Cox's named powers (0: the log)
EDGE = 1e-12  # the least value an inverse returns past the transform's range


def box_cox(v: np.ndarray, power: float) -> np.ndarray:
    """Positive ``v`` on the Box-Cox scale of ``power`` (0: the log)."""
    return np.log(v) if power == 0 else (v ** power - 1.0) / power


def inverse(z: np.ndarray, power: float) -> np.ndarray:
    """``box_cox``'s inverse (values past the transform's range held at its edge)."""
    if power == 0:
        return np.exp(z)
    return np.maximum(power * z + 1.0, EDGE) ** (1.0 / power)


def fit_power(X: np.ndarray, v: np.ndarray, spread: float = 0.0,
              cells: np.ndarray | None = None, powers: tuple[float, ...] = POWERS
              ) -> tuple[GP, float]:
    """The process of positive values ``v`` on the Box-Cox power (of ``powers``) of the best
    likelihood, the Jacobian counted: (process on that scale, power). ``spread``: the
    measured relative spread, the noise floor (as on the log scale)."""
    typical = float(np.median(v))
    best, best_ll, best_power = None, -math.inf, 0.0
    for power in powers:
        z = box_cox(v, power)
        gp = fit(X, z, noise_floor=(spread * typical ** power) ** 2, cells=cells)
        ll = gp.log_likelihood() + (power - 1.0) * float(np.log(v).sum())
        if ll > best_ll:
            best, best_ll, best_power = gp, ll, power
    assert best is not None
    return best, best_power


@dataclass(frozen=True, eq=False)
class Objectives:
    """One process per objective, each on its Box-Cox power, told the trials in flight."""

    gps: tuple[GP, ...]
    powers: tuple[float, ...]  # each objective's Box-Cox power (0: the log)
    maximise: np.ndarray  # bool per objective

    def minimised(self, z: np.ndarray) -> np.ndarray:
        """Values on the processes' scales (... x d) -> minimised objectives (a maximised
        one negated)."""
        v = np.stack([inverse(z[..., j], self.powers[j]) for j in range(z.shape[-1])], -1)
        return np.where(self.maximise, -v, v)


def in_flight(h: History, s: FrontSettings) -> np.ndarray:
    """The configurations in flight (running trials', then those still being asked), one
    row each (none without the rule ``FrontSettings.believer``)."""
    if not s.believer:
        return np.zeros((0, len(h.enc.names)))
    return np.array([h.enc.encode(t.params) for t in h.running]
                    + [h.enc.encode(p) for p in h.pending]).reshape(-1, len(h.enc.names))


def objectives(h: History, s: FrontSettings, running: np.ndarray) -> Objectives:
    """Each objective's process on the power of the best likelihood (``fit_power``), its
    noise floor the measured spread, told ``running`` at its own mean."""
    values = np.maximum(np.abs(np.array([t.values for t in h.measured], float)), s.floor)
    spread = measured_spread(h, s)
    Xe, ve = echoed(h, h.measured_x, values)
    fits = [fit_power(Xe, ve[:, j], spread[j], h.cells, POWERS if s.box_cox else (0.0,))
            for j in range(h.count)]
    powers = tuple(power for _, power in fits)
    gps = tuple(gp.believing(running) for gp, _ in fits)
    return Objectives(gps, powers, h.maximise)


def measured_spread(h: History, s: FrontSettings) -> np.ndarray:
    """Each objective's median relative spread (range over median) over the measured
    trials repeated at least twice (the record's ``spread``: confirmation runs), else its
    median relative standard deviation read from the trials' intervals (a ladder's
    capacity: ``TrialRecord.interval_sd_rel``), else 0 (always 0 without the rule
    ``FrontSettings.measured_spread``)."""
    if not s.measured_spread:
        return np.zeros(h.count)
    out = []
    for m in s.metrics or ("",) * h.count:
        records = [record_of(t) for t in h.measured]
        spreads = [r.spread.get(m) for r in records]
        vals = [sp.rel for sp in spreads if sp is not None and sp.n > 1]
        if not vals:  # a figure measured with its interval (capacity): the interval's sd
            vals = [sd for r in records if (sd := r.interval_sd_rel(m)) is not None]
        out.append(float(np.median(vals)) if vals else 0.0)
    return np.array(out[:h.count])


def echoed(h: History, X: np.ndarray, y: np.ndarray, rows: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """The measured trials' data (``X``, ``y``: one row each) with their echoes added, each
    with its trial's row of ``y``; ``rows``: the trials to keep (bool each; default all)."""
    keep = np.ones(len(X), bool) if rows is None else rows
    echo = [(i, x) for i, x in h.echoes if keep[i]]
    if not echo:
        return X[keep], y[keep]
    return (np.vstack([X[keep], [x for _, x in echo]]),
            np.vstack([y[keep], [y[i] for i, _ in echo]]))


Probability = Callable[[np.ndarray], np.ndarray]


def probability(X: np.ndarray, y: np.ndarray, running: np.ndarray, noise: float,
                cells: np.ndarray | None, sd_floor: float) -> Probability:
    """P(value > 0) under a process fitted to ``y`` (constant when ``y`` is)."""
    if len(y) == 0 or np.ptp(y) == 0:
        p = 1.0 if len(y) == 0 or y[0] > 0 else 0.0
        return lambda c: np.full(len(c), p)
    gp = fit(X, y, noise_floor=noise, cells=cells).believing(running)

    def prob(c: np.ndarray) -> np.ndarray:
        mu, sd = gp.predict(c)
        return 0.5 * (1.0 + _erf(mu / np.maximum(sd, sd_floor) / math.sqrt(2.0)))
    return prob


_erf = np.vectorize(math.erf)


def feasibility(h: History, s: FrontSettings, running: np.ndarray) -> Probability:
    """P(started) x P(every SLO met) as a function of candidates (see the module)."""
    X = np.array([h.enc.encode(h.at(t)) for t in h.told])
    y = np.array([1.0 if started(t) else -1.0 for t in h.told])
    models = [probability(X, y, running, s.started_noise, h.cells, s.sd_floor)]
    keys = sorted({k for t in h.measured for k in (t.constraints or {}) if k != STARTS})
    for key in keys:
        has = np.array([key in (t.constraints or {}) for t in h.measured])
        c = np.array([float((t.constraints or {}).get(key, 0.0)) for t in h.measured])
        Xc, c = echoed(h, h.measured_x, c[:, None], has)
        c = c[:, 0]
        scale = float(np.median(np.abs(c))) or 1.0
        met = -np.sign(c) * np.log1p(np.abs(c) / scale) if s.slo_scale else -c
        models.append(probability(Xc, met, running, s.slo_noise, h.cells, s.sd_floor))

    def prob(cands: np.ndarray) -> np.ndarray:
        return np.prod([m(cands) for m in models], axis=0)
    return prob


def any_feasible(h: History) -> bool:
    """Whether a measured trial met every constraint."""
    return any(feasible(t) for t in h.measured)
