"""Where the model looks: candidates in a trust region around the measured front, each
repaired to where it will run and kept only while fresh.

TuRBO (Eriksson et al., 2019) draws the candidates of each proposal in a box around the
incumbent, of side ``FrontSettings.region`` on the unit cube times each dimension's weight:
its length scale over their geometric mean, so a flag the processes find steep moves a
little and one they find flat moves far. Candidates drawn over the whole cube move every
flag at once, far from anything measured, where the processes' spread alone makes a
proposal look valuable (docs/decisions/0005 and 0007: most of those proposals measured a
plateau point again). Here the incumbent is the measured front (each candidate around one
of its points, drawn at random). TuRBO grows and shrinks the side with successes and
failures; within a study's model proposals it would stay near its start, which is kept.

Fresh (``fresh``): not within ``near`` of an asked configuration, nor of one that a measured
trial's engine showed would measure alike (``History.echoes``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from tuner.search.front.history import History
from tuner.search.front.settings import FrontSettings
from tuner.trials.pareto import nondominated


def weights(lengths: Sequence[np.ndarray]) -> np.ndarray:
    """The geometric mean of the processes' length scales, dimension by dimension."""
    product = lengths[0]
    for more in lengths[1:]:
        product = product * more
    return {1: np.asarray, 2: np.sqrt, 3: np.cbrt}[len(lengths)](product)


def trust_region(centres: np.ndarray, categorical: np.ndarray, lengths: np.ndarray | None,
                 n: int, rng: np.random.Generator, s: FrontSettings) -> np.ndarray:
    """``n`` points on the unit cube, each drawn uniformly in the box around one of
    ``centres`` (at random): side ``s.region`` times each numeric dimension's weight (its
    length scale, within ``s.region_lengths``, over their geometric mean; ``lengths`` None:
    equal weights), clipped to the cube; a ``categorical`` dimension keeps the centre's
    value or, with probability ``s.region_flip``, takes a random one."""
    dim = centres.shape[1]
    scales = np.clip(np.ones(dim) if lengths is None else lengths, *s.region_lengths)
    numeric = ~categorical
    weighed = scales / np.exp(np.log(scales[numeric]).mean()) if numeric.any() else scales
    base = centres[rng.integers(len(centres), size=n)]
    box = base + rng.uniform(-1.0, 1.0, base.shape) * (0.5 * s.region * weighed)
    flip = rng.random(base.shape) < s.region_flip
    out = np.where(categorical, np.where(flip, rng.random(base.shape), base), box)
    return np.clip(out, 0.0, 1.0)


def onfront(h: History) -> list[int]:
    """The measured trials that no other measured trial dominates (indices)."""
    mins = h.minimised(np.array([t.values for t in h.measured]))
    return nondominated(range(len(mins)), [tuple(m) for m in mins.tolist()])


def candidates(h: History, s: FrontSettings, rng: np.random.Generator,
               lengths: np.ndarray | None = None) -> np.ndarray:
    """Points in the trust region around the measured front (weighed by the processes'
    ``lengths``), snapped, repaired, fresh."""
    X, cat = h.measured_x, h.enc.categorical()
    front = onfront(h)
    out = trust_region(X[front], cat, lengths if s.weighted_region else None, s.candidates,
                       rng, s)
    cands = np.array([h.enc.snap(x) for x in out])
    if s.repair is not None and s.repair_candidates:  # where the rules will run them
        fixed = [s.repair(h.enc.decode(x)) for x in cands]
        cands = np.array([h.enc.encode(f) for f in fixed if f is not None]).reshape(
            -1, X.shape[1])
    cands = np.unique(cands, axis=0)
    return cands[fresh(h, s, cands)]


def fresh(h: History, s: FrontSettings, X: np.ndarray) -> np.ndarray:
    """Rows of ``X`` not within ``near`` of an asked configuration, nor of one that
    measures alike (``History.echoes``)."""
    seen = np.vstack([h.asked, *(x[None] for _, x in h.echoes)]) if h.echoes else h.asked
    if not len(seen):
        return np.ones(len(X), bool)
    cat = h.enc.categorical()
    d = np.abs(X[:, None, :] - seen[None, :, :])
    same = np.where(cat, d < s.same, d < s.near).all(-1)
    return ~same.any(1)


def unasked(h: History, s: FrontSettings, params: Mapping[str, Any]) -> bool:
    """``params`` is fresh, as asked and as the rules will run it (two probes that the
    rules repair onto one configuration are one configuration)."""
    fixed = s.repair(dict(params)) if s.repair is not None else None
    rows = [h.enc.encode(params)] + ([h.enc.encode(fixed)] if fixed else [])
    return bool(fresh(h, s, np.array(rows)).all())
