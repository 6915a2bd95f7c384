"""A small Gaussian-process surrogate over an encoded search space (pure numpy).

The processes work on the unit cube (``tuner.search.front.encoding``). ``fit`` learns a
Matern-5/2 process with one length scale per dimension and a noise variance (no lower
than ``noise_floor``) by maximising the marginal likelihood over a small grid, one
dimension at a time; ``GP.predict`` gives the posterior mean and standard
deviation in the data's units, ``GP.covariance`` the posterior covariance between two sets
of points (for draws of several points at once). A few milliseconds for the tens of trials
a study has.

**Cells.** A categorical flag may change what the other flags mean (without chunked
prefill the token budget must hold a whole prompt: it is flat past one prompt where a
chunked budget is steep). One length scale per flag, shared by both sides, cannot say
"flat here, steep there". Given ``cells`` (the dimensions of such flags), the kernel adds
to the shared term one that correlates points of the same cell only, with its own
length scales: ``(1 - w) k(a, b) + w [cell(a) = cell(b)] k_cell(a, b)`` (the shared and
cell-specific components of a hierarchical or multi-task process). ``w`` = 0 is the plain
process, ``w`` = 1 a process per cell; the marginal likelihood chooses
(``ProcessSettings.cell_shares``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ProcessSettings:
    """Every number of a process's fit, each with why (``PROCESS``: the one in use)."""

    lengths: tuple[float, ...] = (0.1, 0.2, 0.4, 0.8)  # isotropic scales tried first (unit cube)
    scales: tuple[float, ...] = (0.5, 2.0, 4.0, 30.0)  # then each dimension's multiplier
    prior_length: float = 1.0  # a flag matters little until the data show it does ...
    prior_log_sd: float = 1.0  # ... by this much on a log scale
    noises: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 0.05, 0.2)  # variances tried (standardised)
    longest: float = 30.0  # the longest length scale: a flag that hardly matters
    cell_shares: tuple[float, ...] = (0.5, 1.0)  # the cell term's prior share tried (and 0)
    nugget: float = 1e-8  # added to the kernel's diagonal so that its Cholesky factor exists
    least_variance: float = 1e-12  # the least posterior variance (standardised): sd > 0
    same: float = 1e-9  # unit-cube distance of one value (a cell's)
    decimals: int = 9  # a cell's coordinates rounded to this many: one cell, one key


PROCESS = ProcessSettings()


def _matern(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    d = np.sqrt(np.maximum(((a[:, None, :] - b[None, :, :]) / lengths) ** 2, 0.0).sum(-1))
    s = math.sqrt(5.0) * d
    return (1.0 + s + s * s / 3.0) * np.exp(-s)


@dataclass(frozen=True)
class Kernel:
    """Matern 5/2 with ``lengths``, plus (``share`` > 0) a term over pairs in the same cell
    (equal on every ``cells`` dimension) with its own ``cell_lengths`` (see the module)."""

    lengths: np.ndarray
    cells: np.ndarray | None = None  # bool per dimension
    cell_lengths: np.ndarray | None = None
    share: float = 0.0

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        k = _matern(a, b, self.lengths)
        if self.share <= 0 or self.cells is None or self.cell_lengths is None:
            return k
        same = (np.abs(a[:, None, self.cells] - b[None, :, self.cells]) < PROCESS.same).all(-1)
        return (1.0 - self.share) * k + self.share * same * _matern(a, b, self.cell_lengths)

    def penalty(self) -> float:
        """Minus the log prior of the length scales: the shared ones near the cube's size,
        the cell term's (while it has weight) near the shared ones, so a cell pays for each
        length scale in which it differs."""
        out = (np.log(self.lengths / PROCESS.prior_length) ** 2).sum()
        if self.share > 0 and self.cell_lengths is not None:
            out += (np.log(self.cell_lengths / self.lengths) ** 2).sum()
        return 0.5 * float(out) / PROCESS.prior_log_sd ** 2

    def with_lengths(self, lengths: np.ndarray, cell: bool = False) -> "Kernel":
        if cell:
            return Kernel(self.lengths, self.cells, lengths, self.share)
        return Kernel(lengths, self.cells, self.cell_lengths, self.share)


@dataclass(frozen=True)
class GP:
    """A fitted process: ``predict`` gives (mean, sd) in the data's units."""

    X: np.ndarray
    y: np.ndarray
    kernel: Kernel
    noise: float  # variance, standardised units
    chol: np.ndarray
    alpha: np.ndarray
    mean: float
    scale: float

    @property
    def lengths(self) -> np.ndarray:
        """The shared term's length scales."""
        return self.kernel.lengths

    def predict(self, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = self.kernel(Xs, self.X)
        mu = k @ self.alpha
        v = np.linalg.solve(self.chol, k.T)
        var = np.maximum(1.0 - (v * v).sum(0), PROCESS.least_variance)
        return self.mean + self.scale * mu, self.scale * np.sqrt(var)

    def covariance(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """The posterior covariance of the process's values (noise excluded) at ``A`` and
        ``B`` (len(A) x len(B)), in the data's units squared."""
        va = np.linalg.solve(self.chol, self.kernel(A, self.X).T)
        vb = np.linalg.solve(self.chol, self.kernel(B, self.X).T)
        return self.scale ** 2 * (self.kernel(A, B) - va.T @ vb)

    def log_likelihood(self) -> float:
        """The log marginal likelihood of ``y`` in the data's units (the standardisation's
        Jacobian counted), with the length scales' prior: comparable across transforms of
        the same data."""
        lml, _ = _posterior(self.X, self.y, self.kernel, self.noise, self.mean, self.scale)
        return lml - len(self.y) * math.log(self.scale)

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
        return _posterior(X, y, self.kernel, self.noise, self.mean, self.scale)[1]


def _posterior(X, y, kernel: Kernel, noise, mean, scale) -> tuple[float, GP]:
    """(log marginal likelihood, GP) of standardised ``y`` under the hyperparameters."""
    z = (y - mean) / scale
    k = kernel(X, X) + (noise + PROCESS.nugget) * np.eye(len(X))
    try:
        chol = np.linalg.cholesky(k)
    except np.linalg.LinAlgError:
        return -math.inf, None  # type: ignore[return-value]
    alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, z))
    lml = -0.5 * z @ alpha - np.log(np.diag(chol)).sum()
    lml -= kernel.penalty()  # a weak prior: length scales near the cube's size
    return float(lml), GP(X, y, kernel, noise, chol, alpha, mean, scale)


def fit(X: np.ndarray, y: np.ndarray, noise_floor: float | None = None,
        cells: np.ndarray | None = None) -> GP:
    """The process of the best marginal likelihood over the grid (see the module);
    ``noise_floor``: the least noise variance in the data's units (default: the least
    tried); ``cells``: the dimensions (bool each) whose values make a cell, or None."""
    if noise_floor is None:
        noise_floor = PROCESS.noises[0]
    mean, scale = float(y.mean()), float(y.std()) or 1.0
    noises = [max(n, noise_floor / scale ** 2) for n in PROCESS.noises]
    best, best_lml = None, -math.inf
    for length in PROCESS.lengths:
        for noise in noises:
            lml, gp = _posterior(X, y, Kernel(np.full(X.shape[1], length)), noise, mean,
                                 scale)
            if lml > best_lml:
                best, best_lml = gp, lml
    assert best is not None
    best, best_lml = _coordinates(X, y, best, best_lml, cell=False)
    if cells is None or not cells.any() or len(_cell_keys(X, cells)) < 2:
        return best
    plain = best
    for share in PROCESS.cell_shares:  # the noise too: what the plain process took for noise may
        start, start_lml = None, -math.inf  # be a difference between the cells
        for noise in noises:
            k = Kernel(plain.lengths, cells, plain.lengths.copy(), share)
            lml, gp = _posterior(X, y, k, noise, mean, scale)
            if lml > start_lml:
                start, start_lml = gp, lml
        if start is None:
            continue
        gp, lml = _coordinates(X, y, start, start_lml, cell=True)
        if lml > best_lml:
            best, best_lml = gp, lml
    return best


def _cell_keys(X: np.ndarray, cells: np.ndarray) -> set:
    return {tuple(row) for row in np.round(X[:, cells], PROCESS.decimals)}


def _coordinates(X, y, best: GP, best_lml: float, cell: bool) -> tuple[GP, float]:
    """One pass of each dimension's length scale over ``ProcessSettings.scales`` (the cell
    term's with ``cell``), keeping the best marginal likelihood."""
    kernel = best.kernel
    lengths = (kernel.cell_lengths if cell else kernel.lengths).copy()
    for dim in range(X.shape[1]):
        for m in PROCESS.scales:
            trial = lengths.copy()
            trial[dim] = min(lengths[dim] * m, PROCESS.longest)
            lml, gp = _posterior(X, y, kernel.with_lengths(trial, cell), best.noise,
                                 best.mean, best.scale)
            if lml > best_lml:
                best, best_lml = gp, lml
        kernel = best.kernel
        lengths = (kernel.cell_lengths if cell else kernel.lengths).copy()
    return best, best_lml
