"""The start-up schedule: after the enqueued baselines, moves from the default that the
tuning guides name (``FrontSettings.probes``), before the model has data to learn from.

They go towards low latency (an eighth of the token budget and of the sequences), to the
low-latency corner (the article's small chunked budget, with as many sequences as tokens),
to a quarter of the budget and of the sequences, and mirrored (four times the budget and
the sequences, where the space has room). Each factor is jittered by the seed (up to
``jitter`` on a log scale), so seeds run different trajectories; parallel workers take
distinct probes (``tuner.search.front.sampler``).

The probes keep the default's categorical flags, so they also move from the baselines that
run where the default's probes never go (``parents``). Under rules that move the default
into another categorical cell (the article's rules turn its prefix caching off), that is
each started baseline that keeps the value taken. Under rules that leave it as it is, that
is each started baseline in another mode (``Param.mode``). Either parent is skipped once a
measured trial on the other side beats it on every objective.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from optuna.trial import FrozenTrial

from tuner.search.front.candidates import unasked
from tuner.search.front.history import History, probes_held, record_of, started
from tuner.search.front.settings import CORNER, MIRRORED, FrontSettings
from tuner.space.distributions import clip


def probe(h: History, s: FrontSettings, seed: int | None
          ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The first probe of the first parent that no trial holds and that gives a
    configuration not asked yet: (params, move), or None when none is left."""
    done = probes_held(h.moves)
    for parent in parents(h, s):
        here = h.at(parent)
        for i, factors in enumerate(s.probes):
            if (parent.number, i) in done or not made(s, i):
                continue
            params = moved(h, s, here, factors, np.random.default_rng(
                [i, 0 if seed is None else seed + 1]))
            if params != here and unasked(h, s, params):
                return params, {"kind": "probe", "probe": i, "parent": parent.number}
    return None


def made(s: FrontSettings, i: int) -> bool:
    """Whether probe ``i`` is made: the corner and the mirrored ones only while their rules
    are on."""
    return (s.corner_probe or i != CORNER) and (s.mirrored_probes or i not in MIRRORED)


def moved(h: History, s: FrontSettings, here: Mapping[str, Any],
          factors: Mapping[str, float], jitter: np.random.Generator) -> dict[str, Any]:
    """``here`` with each flag of ``factors`` the space searches scaled by its factor,
    jittered on a log scale by up to ``s.jitter`` (drawn from ``jitter``), made valid and
    put on the space's compile grid."""
    params = dict(here)
    for name, factor in factors.items():
        if name in h.space:
            f = factor * math.exp(jitter.uniform(-s.jitter, s.jitter)) if s.jitter_probes \
                else factor
            params[name] = clip(h.space[name], here[name] * f)
    return s.grid(params) if s.grid is not None else params


def parents(h: History, s: FrontSettings) -> list[FrozenTrial]:
    """The trials the probes move from: the default, then (``regimes``), when the rules
    take a categorical value of the default's from its probes, each started baseline that
    keeps what they took and that the rules leave as it is, so the probes run where that
    value is allowed; when they take nothing, each started baseline that the rules leave
    as it is in a mode (``FrontSettings.cells``) no parent runs, so the probes cover both
    sides of a mode switch; none that a measured trial on the other side already beats on
    every objective (the default counts when the rules took nothing from it)."""
    if h.default is None or not started(h.default):
        return []
    here = h.at(h.default)
    mine, fixed = cell(h, s, here), cell(h, s, here, True)
    taken = {n: v for n, v in mine.items() if fixed[n] != v}
    out, cells = [h.default], [mine]
    if not s.regimes:
        return out
    for t in h.trials:
        if t is h.default or not record_of(t).baseline or not started(t):
            continue
        flags = h.at(t)
        own, repaired = cell(h, s, flags), cell(h, s, flags, True)
        if taken:  # keeps what the rules took, as the rules leave it
            apart = taken
            keeps = all(repaired[n] == v == own[n] for n, v in taken.items())
        else:  # in a mode no parent runs, as the rules leave it
            apart = {n: own[n] for n in s.cells if n in own}
            keeps = bool(apart) and repaired == own and all(
                any(c[n] != v for n, v in apart.items()) for c in cells)
        beaten = s.beaten_parents and dominated(h, s, t, apart, bool(taken))
        if keeps and own not in cells and not beaten:
            out.append(t)
            cells.append(own)
    return out


def dominated(h: History, s: FrontSettings, t: FrozenTrial, taken: Mapping[str, Any],
              changed: bool = True) -> bool:
    """Whether a measured trial without the ``taken`` values beats ``t`` on every
    objective: the other side of the choice already does better (``changed``: the rules
    change the default, so its values cannot be had and do not count)."""
    mine = h.minimised(np.array(t.values))
    for other in h.measured:
        flags = cell(h, s, h.at(other))
        if (changed and other is h.default) or all(flags[n] == v for n, v in taken.items()):
            continue
        theirs = h.minimised(np.array(other.values))
        if (theirs <= mine).all() and (theirs < mine).any():
            return True
    return False


def cell(h: History, s: FrontSettings, params: Mapping[str, Any],
         repaired: bool = False) -> dict[str, Any]:
    """The categorical flags of ``params`` (``repaired``: as the space's rules repair
    them)."""
    if repaired and s.repair is not None:
        params = s.repair(dict(params)) or params
    return {n: params[n] for n, c in zip(h.enc.names, h.enc.categorical()) if c}
