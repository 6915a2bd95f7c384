"""One proposal of the local sampler: its view of the study and the moves it makes.

``Proposer`` sees the trials (what was asked, what each ran with, the default baseline,
the measured front and each point's gain above the default) and makes the first move that
its ``LocalSettings.order`` lists and that proposes a configuration not asked yet (see
``tuner.search.local`` for the moves and why).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import FrozenTrial

from contenders.steps import (LOG_FACTORS, NEAR, apply_step, big, clip, halved, movable,
                                probe_key, random_step)
from tuner.trials.hypervolume import hypervolume
from tuner.trials.pareto import nondominated
from tuner.trials.queries import flags_of, is_default_baseline, started

MOVE = "local:move"

# Without chunked prefill vLLM needs max-num-batched-tokens >= max-model-len, and the rules
# raise the budget to the length: a budget move from where they are tied moves both
BUDGET, LENGTH, CHUNKED = "max_num_batched_tokens", "max_model_len", "enable_chunked_prefill"
FILL_SHARE = 0.01  # fill a gap on the front while it could add 1% of the hypervolume
MARGIN = 0.001  # the reference: the default made 0.1% worse, so a tie on one objective gains
HOPELESS = 0.2  # a midpoint interpolated 20% worse than the default is not tried
COUPLED = 0.4  # share of local moves that scale two log-scaled flags by one factor


def pareto(trials: Sequence[FrozenTrial], signs: Sequence[float]) -> list[FrozenTrial]:
    """The non-dominated trials (values multiplied by ``signs`` so that lower is better)."""
    return nondominated(trials, [tuple(s * v for s, v in zip(signs, t.values)) for t in trials])


@dataclass(frozen=True)
class LocalSettings:
    """What the local sampler asks of a proposal: the deterministic moves in the order they
    are tried (names of ``Proposer``'s moves), the share of local moves when none applies
    (else the base sampler proposes), and the probes (``contenders.steps.PROBES``)."""

    order: tuple[str, ...]
    local_share: float
    probes: tuple


class Proposer:
    """One proposal's view of the study: what was asked, the default, the front."""

    def __init__(self, settings: LocalSettings, rng: np.random.RandomState,
                 trials: Sequence[FrozenTrial], directions, space: dict[str, BaseDistribution]):
        self._by_name: dict[str, Callable[[], tuple[dict[str, Any], dict] | None]] = {
            "extend": self.extend, "mirror": self.mirror, "shrink": self.shrink,
            "fill": self.fill, "probe": self.probe}
        unknown = set(settings.order) - set(self._by_name)
        if unknown:
            raise ValueError(f"unknown moves {sorted(unknown)}; choose from "
                             f"{tuple(self._by_name)}")
        self.settings, self.rng, self.space = settings, rng, space
        self.origins = {t.number: self._origin(t) for t in trials if t.params}
        self.asked = {self.key(t.params) for t in trials if t.params}
        self.asked |= {self.key(o) for o in self.origins.values()}
        self.signs = [1.0 if d == optuna.study.StudyDirection.MINIMIZE else -1.0
                      for d in directions]
        self.done = [t for t in trials if started(t) and set(space) <= set(t.params)]
        self.default = next((t for t in trials if is_default_baseline(t)
                             and set(space) <= set(t.params)), None)
        self.moves = [(t, t.system_attrs[MOVE]) for t in trials if MOVE in t.system_attrs]

    def origin(self, t: FrozenTrial) -> dict[str, Any]:
        return self.origins[t.number]

    def _origin(self, t: FrozenTrial) -> dict[str, Any]:
        """Where ``t`` was measured, in the space's terms: its effective flags (what the rule
        set repaired its params to, e.g. a budget raised to max-model-len without chunked
        prefill) where they are valid values, else its params. Moves start from here: a
        move from params that a repair overrode would be repaired back, a wasted proposal."""
        flags = flags_of(t)
        out = {}
        for name, dist in self.space.items():
            value = clip(dist, flags[name]) if name in flags else None
            out[name] = value if value is not None else t.params.get(name)
        return out

    def key(self, params: dict[str, Any]) -> tuple:
        return tuple((n, params.get(n)) for n in sorted(self.space))

    def fresh(self, params: dict[str, Any] | None) -> bool:
        """Not asked yet, nor near an asked configuration (the same choices, every number
        within ``NEAR``: 2% on a log scale, 1% of the range on a linear one)."""
        if params is None or self.key(params) in self.asked:
            return False
        mine = self.scaled(params)
        return not any(all(a == b if isinstance(a, str) else abs(a - b) < 1.0
                           for a, b in zip(mine, other)) for other in self.asked_scaled)

    def scaled(self, params: dict[str, Any]) -> list:
        """Each number in units of ``NEAR`` (choices as their text)."""
        out: list = []
        for n in sorted(self.space):
            d, v = self.space[n], params.get(n)
            if isinstance(d, CategoricalDistribution) or v is None or d.low >= d.high:
                out.append(repr(v))
            elif d.log:
                out.append(math.log(max(v, 1e-12)) / math.log1p(NEAR[0]))
            else:
                out.append(v / (NEAR[1] * (d.high - d.low)))
        return out

    @cached_property
    def asked_scaled(self) -> list[list]:
        return [self.scaled(dict(k)) for k in self.asked]

    def propose(self) -> tuple[dict[str, Any], dict] | None:
        for name in self.settings.order:
            out = self._by_name[name]()
            if out is not None:
                return out
        if self.rng.rand() >= self.settings.local_share or not self.done:
            return None
        return self.local()

    def moved(self, params: dict[str, Any], steps: dict[str, list]) -> dict[str, Any] | None:
        out = {n: params[n] for n in self.space}
        steps = dict(steps)
        tied = BUDGET, LENGTH
        if (set(tied) <= set(self.space) and params[BUDGET] == params[LENGTH]
                and params.get(CHUNKED) is False and LENGTH not in steps
                and steps.get(BUDGET, [""])[0] == "x"):
            steps[LENGTH] = steps[BUDGET]  # without chunking the budget covers the length
        for name, step in steps.items():
            if name not in self.space:
                continue
            start = self.binding(name, out[name]) if step[0] == "x" else out[name]
            value = apply_step(self.space[name], start, step)
            if value is None:
                return None
            out[name] = value
        return out

    def probe(self):
        """The probes from the trial that gains most over the default, as soon as one does
        (the default's own probes then wait: they rarely beat what already gains); else the
        default's probes, then the front's best compromise's."""
        center = self.center()
        if (center is not None and center is not self.default
                and center.number in self.gaining_numbers):
            return self.probe_from(center)
        out = self.probe_from(self.default)
        return out if out is not None or center is self.default else self.probe_from(center)

    @cached_property
    def by_number(self) -> dict[int, FrozenTrial]:
        """The measured trials by number (moves name their parent by number)."""
        return {t.number: t for t in self.done}

    @cached_property
    def front(self) -> list[FrozenTrial]:
        """The Pareto front of the measured trials, the first of any twins only."""
        firsts = [t for t in self.done if t.number not in self.twin_of]
        return pareto(firsts, self.signs) if firsts else []

    @cached_property
    def front_gains(self) -> np.ndarray:
        return self.gains(self.front) if self.front else np.zeros(0)

    @cached_property
    def gaining_numbers(self) -> set[int]:
        """Front trials that gain over the default (twins are not on the front: moving
        on from them would repeat the first one's moves)."""
        return {t.number for t, g in zip(self.front, self.front_gains) if g > 0}

    @cached_property
    def twin_of(self) -> dict[int, int]:
        """Trials that measured exactly the values of an earlier trial: that trial's
        number."""
        first: dict[tuple, int] = {}
        out = {}
        for t in sorted(self.done, key=lambda t: t.number):
            n = first.setdefault(self.vector(t), t.number)
            if n != t.number:
                out[t.number] = n
        return out

    @cached_property
    def flat(self) -> dict[str, list[tuple]]:
        """Flat stretches of log-scaled flags: a one-flag probe that measured exactly its
        parent's values, as (low, high, the value it landed on) per flag."""
        out: dict[str, list[tuple]] = {}
        for t, m in self.moves:
            parent = self.by_number.get(m["parent"])
            if (m["kind"] == "probe" and len(m["steps"]) == 1 and started(t)
                    and parent is not None and self.vector(t) == self.vector(parent)):
                (name, step), = m["steps"].items()
                if step[0] == "x" and name in self.space:
                    a, b = self.origin(parent)[name], self.origin(t)[name]
                    out.setdefault(name, []).append((min(a, b), max(a, b), b))
        return out

    def binding(self, name: str, value: Any) -> Any:
        """``value``, or the end of a flat stretch it lies in (where the flag starts to
        bind: a factor from there moves something)."""
        return next((end for lo, hi, end in self.flat.get(name, ()) if lo <= value <= hi),
                    value)

    @cached_property
    def inert(self) -> set[tuple]:
        """Probes whose flags did not matter: the probe measured exactly the values of an
        earlier trial whose flags differ from its own in the probed flags only (its parent,
        or the same move's repair measured before). Not probed again from later centres."""
        out = set()
        for t, m in self.moves:
            if m["kind"] != "probe" or not started(t):
                continue
            here, names = self.origin(t), set(m["steps"])
            for u in self.done:
                if (u.number < t.number and self.vector(u) == self.vector(t)
                        and {n for n in self.space if self.origin(u)[n] != here[n]} <= names):
                    out.add(probe_key(m["steps"]))
                    break
        return out

    def probe_from(self, center: FrozenTrial | None):
        if center is None:
            return None
        here = self.origin(center)
        for probe in self.settings.probes:
            steps = {n: s for n, s in probe.items() if n in self.space}
            if probe_key(steps) in self.inert:
                continue
            params = self.moved(here, steps)
            if steps and params != here and self.fresh(params) and not self.walked(here, params):
                return params, {"kind": "probe", "parent": center.number, "steps": steps}
        return None

    def walked(self, here: dict[str, Any], there: dict[str, Any]) -> bool:
        """A one-number move already measured on the way: some trial differs from ``here``
        in that number only, with a value between ``here``'s and ``there``'s (the line was
        walked by extensions and their halves; probing it again tells little)."""
        differ = [n for n in self.space if here[n] != there[n]]
        if len(differ) != 1 or isinstance(self.space[differ[0]], CategoricalDistribution):
            return False
        n = differ[0]
        lo, hi = sorted((here[n], there[n]))
        for t in self.done:
            o = self.origin(t)
            if lo <= o[n] <= hi and o[n] != here[n] and all(
                    o[m] == here[m] for m in self.space if m != n):
                return True
        return False

    def center(self) -> FrozenTrial | None:
        """Where the probes start after the default's: the measured trial with the largest
        gain over the default; while none gains, the front's best compromise (the least
        relative loss against the default: e.g. the first point the rule set leaves as
        asked, when it repairs the default's moves)."""
        if self.default is None or not started(self.default):
            return self.default
        front, gains = self.front, self.front_gains
        if gains.max() > 0:
            return front[int(gains.argmax())]
        mine = self.vector(self.default)
        others = [t for t in front if self.vector(t) != mine]
        if not others:
            return self.default
        return min(others, key=lambda t: max((a - b) / abs(b) if b else 0.0
                                             for a, b in zip(self.vector(t), mine)))

    def numeric_moves(self):
        """(trial, its move's numeric steps, its parent, gaining trial numbers), newest first."""
        gaining = self.gaining_numbers
        for t, m in reversed(self.moves):
            numeric = {n: s for n, s in m["steps"].items() if s[0] in "x+"}
            parent = self.by_number.get(m["parent"])
            if numeric and parent is not None:
                yield t, m, numeric, parent, gaining

    def extend(self):
        """Repeat a numeric move that gained from where it landed (a pattern move)."""
        for t, m, numeric, parent, gaining in self.numeric_moves():
            if t.number in gaining and self.vector(t) != self.vector(parent):
                params = self.moved(self.origin(t), numeric)
                if self.fresh(params):
                    return params, {"kind": "extend", "parent": t.number, "steps": numeric}
        return None

    def mirror(self):
        """The opposite of a numeric probe that gained, from the same parent: the front
        runs both ways from a point (one direction trades throughput for latency, the
        other latency for throughput), and a response need not be monotonic."""
        for t, m, numeric, parent, gaining in self.numeric_moves():
            if (m["kind"] != "probe" or not self.beats_default(t) or t.number in self.twin_of
                    or self.vector(t) == self.vector(parent)):
                continue
            steps = {n: ["x", 1 / a] if op == "x" else ["+", -a] for n, (op, a) in numeric.items()}
            params = self.moved(self.origin(parent), steps)
            if self.fresh(params):
                return params, {"kind": "probe", "parent": parent.number, "steps": steps}
        return None

    def fill(self):
        """The midpoint of two neighbours on the front that differ in numeric flags only
        (a geometric mean on a log scale), the neighbours with the largest gap first: the
        front between them is a staircase until it is measured."""
        gaining = self.gaining_numbers
        front = sorted((t for t in self.front if t.number in gaining), key=self.vector)
        def gap(ab):  # the most a point between them can add
            return math.prod(abs(x - y) for x, y in zip(self.vector(ab[0]), self.vector(ab[1])))
        pairs = sorted(zip(front, front[1:]), key=gap, reverse=True)
        for a, b in pairs:
            if gap((a, b)) < FILL_SHARE * self.volume:
                break
            pa, pb = self.origin(a), self.origin(b)
            differ = [n for n in self.space if pa[n] != pb[n]]
            if not differ or any(isinstance(self.space[n], CategoricalDistribution)
                                 for n in differ):
                continue
            steps = {n: ["x", math.sqrt(self.binding(n, pb[n]) / self.binding(n, pa[n]))]
                     if self.space[n].log
                     else ["+", (pb[n] - pa[n]) / 2] for n in differ}
            params = self.moved(pa, steps)
            if self.fresh(params) and params != pb:
                return params, {"kind": "fill", "parent": a.number, "steps": steps}
        return None

    def shrink(self):
        """Half of a probe's or extension's move that did not gain (it traded one
        objective for another, lost both, or did not start), from its parent, while the
        step is large (a compass search; a bracket's midpoint on a jagged response). Of
        these, the one whose midpoint, interpolated between parent and result, loses least
        to the default; none that would lose more than ``HOPELESS`` on an objective."""
        best, best_loss = None, HOPELESS
        for t, m, numeric, parent, gaining in self.numeric_moves():
            # (the default's own probes are not shrunk: it cost trials)
            if m["kind"] == "local" or t.number in gaining or (
                    self.twin_of.get(parent.number, parent.number) not in gaining):
                continue
            if started(t) and (self.vector(t) == self.vector(parent) or t.number in self.twin_of):
                continue  # inert, or back onto a measured point: half of it tells as little
            steps = halved(numeric)
            params = self.moved(self.origin(parent), steps)
            if not (big(steps, self.space) and self.fresh(params)):
                continue
            loss = self.loss(parent, t)
            if loss < best_loss:
                best = params, {"kind": "extend", "parent": parent.number, "steps": steps}
                best_loss = loss
        return best

    def loss(self, parent: FrozenTrial, t: FrozenTrial) -> float:
        """The largest relative loss to the default of the midpoint of ``parent`` and
        ``t`` (their values' mean; ``t``'s do not count when it did not start)."""
        if self.default is None or not started(self.default):
            return 0.0
        ref = self.vector(self.default)
        mid = [(a + b) / 2 for a, b in zip(self.vector(parent), self.vector(t))] \
            if started(t) else self.vector(parent)
        return max((m - r) / abs(r) if r else 0.0 for m, r in zip(mid, ref))

    def local(self):
        front, weights = self.front, self.shares()
        names = [n for n, d in self.space.items() if movable(d)]
        for _ in range(50):
            start = front[self.rng.choice(len(front), p=weights)]
            here = self.origin(start)
            k = min(len(names), int(self.rng.choice([1, 2, 3], p=[0.55, 0.3, 0.15])))
            steps = {}
            for name in self.rng.choice(names, size=k, replace=False):
                step = random_step(self.space[name], here[name], self.rng)
                if step is not None:
                    steps[str(name)] = step
            scaled = [n for n in names if getattr(self.space[n], "log", False)]
            if len(scaled) > 1 and self.rng.rand() < COUPLED:  # two budgets scaled together
                factor = ["x", float(self.rng.choice(LOG_FACTORS))]
                steps = {str(n): factor for n in self.rng.choice(scaled, 2, replace=False)}
            params = self.moved(here, steps)
            if steps and self.fresh(params):
                return params, {"kind": "local", "parent": start.number, "steps": steps}
        return None

    def beats_default(self, t: FrozenTrial) -> bool:
        """``t`` measured better than the default on every objective (beyond
        ``reference``: the default made ``MARGIN`` worse)."""
        if self.default is None or not started(self.default) or not started(t):
            return False
        return all(a < r for a, r in zip(self.vector(t), self.reference))

    def vector(self, t: FrozenTrial) -> tuple[float, ...]:
        return tuple(s * v for s, v in zip(self.signs, t.values))

    @cached_property
    def reference(self) -> tuple[float, ...]:
        """The default's values made ``MARGIN`` worse (so that ties gain too), or the
        front's nadir when the default did not start."""
        if self.default is not None and started(self.default):
            return tuple(v + MARGIN * abs(v) for v in self.vector(self.default))
        pts = [self.vector(t) for t in self.front]
        return tuple(max(p[i] for p in pts) + 1e-9 for i in range(len(self.signs)))

    @cached_property
    def volume(self) -> float:
        """The front's hypervolume above ``reference``."""
        return hypervolume(sorted({self.vector(t) for t in self.front}), self.reference) \
            if self.front else 0.0

    def gains(self, front: list[FrozenTrial]) -> np.ndarray:
        """Each front point's exclusive hypervolume above ``reference``."""
        pts = [self.vector(t) for t in front]
        unique = sorted(set(pts))  # a repeated point shares its gain, not loses it
        total = hypervolume(unique, self.reference)
        own = {p: total - hypervolume([q for q in unique if q != p], self.reference)
               for p in unique}
        if self.default is not None and started(self.default):
            own[self.vector(self.default)] = 0.0  # the default gains nothing over itself
        return np.array([own[p] for p in pts])

    def shares(self) -> np.ndarray:
        """Who to move from on the front: the gains' shares plus a floor, so every point
        may be."""
        own = self.front_gains
        share = own / own.sum() if own.sum() > 0 else np.zeros(len(own))
        w = share + 0.1 / len(own)
        return w / w.sum()
