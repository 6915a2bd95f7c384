"""Where the model's random candidates are drawn: a trust region around the measured front.

TuRBO (Eriksson et al., 2019) draws the candidates of each proposal in a box around the
incumbent, of side ``LENGTH`` on the unit cube times each dimension's weight: its length
scale over their geometric mean, so a flag the process finds steep moves a little and one
it finds flat moves far. Candidates drawn over the whole cube move every flag at once, far
from anything measured, where the processes' spread alone makes a proposal look valuable
(docs/decisions/0005 and 0007: most of those proposals measured a plateau point again).
Here the incumbent is the measured front (each candidate around one of its points, drawn at
random), as the moves around the front already were. TuRBO grows the side after 3 successes
in a row and halves it after max(4, d) failures; within a study's 10-20 model proposals it
would stay near its starting side, which is kept fixed.
"""

from __future__ import annotations

import numpy as np

LENGTH = 0.8  # TuRBO's initial side of the region (unit cube)
BOUNDS = (0.005, 2.0)  # TuRBO's bounds on the length scales that weigh the sides
FLIP = 0.1  # a categorical flag takes a random value (the moves around the front's share)


def trust_region(centres: np.ndarray, categorical: np.ndarray, lengths: np.ndarray | None,
                 n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` points on the unit cube, each drawn uniformly in the box around one of
    ``centres`` (at random): side ``LENGTH`` times each numeric dimension's weight (its
    length scale, within ``BOUNDS``, over their geometric mean; ``lengths`` None: equal
    weights), clipped to the cube; a ``categorical`` dimension keeps the centre's value or,
    with probability ``FLIP``, takes a random one."""
    dim = centres.shape[1]
    scales = np.clip(np.ones(dim) if lengths is None else lengths, *BOUNDS)
    numeric = ~categorical
    weights = scales / np.exp(np.log(scales[numeric]).mean()) if numeric.any() else scales
    base = centres[rng.integers(len(centres), size=n)]
    box = base + rng.uniform(-1.0, 1.0, base.shape) * (0.5 * LENGTH * weights)
    flip = rng.random(base.shape) < FLIP
    out = np.where(categorical, np.where(flip, rng.random(base.shape), base), box)
    return np.clip(out, 0.0, 1.0)
