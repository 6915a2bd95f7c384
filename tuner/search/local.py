"""Probes around vLLM's defaults, then pattern moves along the measured Pareto front.

A study's score is its gain over vLLM's defaults, so the region around the default
configuration matters most. ``LocalSampler`` proposes, in this order:

1. **probes**: the tuning guides' moves (``PROBES``): an fp8 KV cache, half and twice the
   token budget, chunked prefill and prefix caching flipped, an eighth of the budget and of
   the sequences (the low-latency corner), fewer sequences, less memory, a larger block.
   From the default baseline's flags while no trial gains over it; as soon as one does, from
   the trial that gains most (the default's remaining probes wait);
2. **extend**: a numeric move that gained, repeated from where it landed (the same factor
   on a log scale, the same step on a linear one: a pattern search); then **shrink**: half
   of a probe's move that traded one objective for the other, from its parent (a compass
   search);
3. with probability ``local_share`` a **local** move of one to three flags from a front
   point (drawn by its share of the hypervolume above the default), else the base
   sampler's proposal (TPE: the global view, and the constraints it learns from).

Every move starts from the flags a trial ran with (its ``flags`` user attribute, what the
rule set repaired its parameters to), not from the parameters it was asked with: a move
from a value the rules overrode would be repaired back to the same configuration. A
configuration already asked (measured, running or refused; as asked or as run) is never
proposed again, so repairs and duplicates cost no trial. Trials that did not start
(``starts`` > 0) are never moved from. Nothing here knows the engine: only the default
baseline's flags and the told values (each proposal's move is kept in the trial's system
attribute ``local:move``).
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any, Sequence

import numpy as np
import optuna
from optuna.distributions import (BaseDistribution, CategoricalDistribution,
                                  FloatDistribution, IntDistribution)
from optuna.trial import FrozenTrial, TrialState

from tuner.results.hypervolume import hypervolume

STARTS = "starts"
MOVE = "local:move"

# Moves from the default, one or two flags each: {flag: step}; a step is ["x", factor]
# (log-scaled flags), ["+", delta] or ["=", value]. Numeric steps can be extended later.
PROBES: tuple[dict[str, list], ...] = (
    {"kv_cache_dtype": ["=", "fp8"]},
    {"max_num_batched_tokens": ["x", 0.5]},
    {"max_num_batched_tokens": ["x", 2.0]},
    {"enable_chunked_prefill": ["!"]},
    {"enable_prefix_caching": ["!"]},
    {"max_num_batched_tokens": ["x", 0.125], "max_num_seqs": ["x", 0.125]},  # low latency
    {"max_num_seqs": ["x", 0.25]},
    {"max_num_batched_tokens": ["x", 0.5], "max_model_len": ["x", 0.5]},  # without chunking
    {"gpu_memory_utilization": ["+", -0.2]},
    {"block_size": ["=", 32]},
)
MARGIN = 0.001  # the reference: the default made 0.1% worse, so a tie on one objective gains
COUPLED = 0.4  # share of local moves that scale two log-scaled flags by one factor
LOG_FACTORS = (0.5, 0.7, 1.4, 2.0)
LINEAR_STEPS = (-0.3, -0.15, -0.08, 0.08, 0.15, 0.3)  # shares of the range


def _clip(dist: BaseDistribution, value: Any) -> Any | None:
    """``value`` made valid for ``dist`` (rounded to its step, clipped), or None."""
    if isinstance(dist, CategoricalDistribution):
        return value if value in dist.choices else None
    if isinstance(dist, IntDistribution):
        return int(min(max(round(value), dist.low), dist.high))
    if isinstance(dist, FloatDistribution):
        v = min(max(float(value), dist.low), dist.high)
        if dist.step:
            v = dist.low + round((v - dist.low) / dist.step) * dist.step
        return round(v, 6)
    return None


def _apply(dist: BaseDistribution, value: Any, step: list) -> Any | None:
    """One step (``["x", factor]``, ``["+", delta]``, ``["=", value]``, ``["!"]``)."""
    op, arg = step[0], step[-1]
    if op == "!":
        return _clip(dist, not value)
    if op == "x":
        return _clip(dist, value * arg)
    if op == "+":
        return _clip(dist, value + arg)
    return _clip(dist, arg)


def _halved(steps: dict[str, list]) -> dict[str, list]:
    """Half of each numeric step: the square root of a factor, half a delta."""
    return {n: ["x", math.sqrt(a)] if op == "x" else ["+", a / 2] for n, (op, a) in steps.items()}


def _big(steps: dict[str, list], space: dict[str, BaseDistribution]) -> bool:
    """Any step still worth trying: a factor beyond 10%, a delta beyond 2% of the range."""
    return any(abs(math.log(a)) > math.log(1.1) if op == "x"
               else abs(a) > 0.02 * (space[n].high - space[n].low)
               for n, (op, a) in steps.items() if n in space)


def _random_step(dist: BaseDistribution, value: Any, rng: np.random.RandomState) -> list | None:
    """A random nearby step: a factor on a log scale, a share of the range on a linear one,
    another choice for a categorical."""
    if isinstance(dist, CategoricalDistribution):
        others = [c for c in dist.choices if c != value]
        return ["=", others[rng.randint(len(others))]] if others else None
    if isinstance(dist, (IntDistribution, FloatDistribution)) and dist.low < dist.high:
        if dist.log:
            return ["x", float(rng.choice(LOG_FACTORS))]
        return ["+", float(rng.choice(LINEAR_STEPS)) * (dist.high - dist.low)]
    return None


def _movable(dist: BaseDistribution) -> bool:
    if isinstance(dist, CategoricalDistribution):
        return len(dist.choices) > 1
    return isinstance(dist, (IntDistribution, FloatDistribution)) and dist.low < dist.high


def started(t: FrozenTrial) -> bool:
    """Measured: complete with finite values, neither ``starts`` > 0 nor infeasible."""
    return (t.state == TrialState.COMPLETE and t.values is not None
            and all(math.isfinite(v) for v in t.values)
            and (t.constraints or {}).get(STARTS, 0.0) <= 0
            and t.user_attrs.get("outcome") != "infeasible")


def pareto(trials: Sequence[FrozenTrial], signs: Sequence[float]) -> list[FrozenTrial]:
    """The non-dominated trials (values multiplied by ``signs`` so that lower is better)."""
    vals = [tuple(s * v for s, v in zip(signs, t.values)) for t in trials]
    return [trials[i] for i, a in enumerate(vals)
            if not any(all(x <= y for x, y in zip(b, a)) and b != a for b in vals)]


class LocalSampler(optuna.samplers.BaseSampler):
    """Probes, pattern, compass and local moves, mixed with ``base`` (see the module)."""

    order = ("extend", "probe", "shrink")  # the deterministic steps: the first that proposes
    shrink_from_default = False  # the default's probes are not shrunk: it cost trials

    def __init__(self, base: optuna.samplers.BaseSampler, seed: int | None = None,
                 local_share: float = 0.6, probes: Sequence = PROBES) -> None:
        self._base = base
        self._rng = np.random.RandomState(seed)
        self._local_share = local_share
        self._probes = tuple(probes)

    # optuna's sampler protocol ------------------------------------------------------
    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return optuna.search_space.intersection_search_space(
            study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        if not search_space:
            return {}
        trials = study.get_trials(deepcopy=False)
        # Parallel workers: the local moves are deterministic, so workers asking at the same
        # moment would run the same configuration side by side; while another trial is in
        # flight, TPE (own seed per worker, constant liar) proposes a distinct one.
        alone = not any(t.state == TrialState.RUNNING and t.number != trial.number
                        for t in trials)
        proposal = _Proposer(self, trials, study.directions, search_space).propose() \
            if alone else None
        if proposal is not None:
            params, move = proposal
            study._storage.set_trial_system_attr(trial._trial_id, MOVE, move)
            return params
        return self._base.sample_relative(
            study, trial, self._base.infer_relative_search_space(study, trial))

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        return self._base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial) -> None:
        self._base.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self._base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._rng.seed()
        self._base.reseed_rng()


class _Proposer:
    """One proposal's view of the study: what was asked, the default, the front."""

    def __init__(self, owner: LocalSampler, trials: Sequence[FrozenTrial], directions,
                 space: dict[str, BaseDistribution]):
        self.owner, self.rng, self.space = owner, owner._rng, space
        self.origins = {t.number: self._origin(t) for t in trials if t.params}
        self.asked = {self.key(t.params) for t in trials if t.params}
        self.asked |= {self.key(o) for o in self.origins.values()}
        self.signs = [1.0 if d == optuna.study.StudyDirection.MINIMIZE else -1.0
                      for d in directions]
        self.done = [t for t in trials if started(t) and set(space) <= set(t.params)]
        self.default = next((t for t in trials if t.user_attrs.get("baseline") == "default"
                             and set(space) <= set(t.params)), None)
        self.moves = [(t, t.system_attrs[MOVE]) for t in trials if MOVE in t.system_attrs]

    def origin(self, t: FrozenTrial) -> dict[str, Any]:
        return self.origins[t.number]

    def _origin(self, t: FrozenTrial) -> dict[str, Any]:
        """Where ``t`` was measured, in the space's terms: its effective flags (what the rule
        set repaired its params to, e.g. a budget raised to max-model-len without chunked
        prefill) where they are valid values, else its params. Moves start from here: a
        move from params that a repair overrode would be repaired back, a wasted proposal."""
        flags = t.user_attrs.get("flags") or {}
        out = {}
        for name, dist in self.space.items():
            value = _clip(dist, flags[name]) if name in flags else None
            out[name] = value if value is not None else t.params.get(name)
        return out

    def key(self, params: dict[str, Any]) -> tuple:
        return tuple((n, params.get(n)) for n in sorted(self.space))

    def fresh(self, params: dict[str, Any] | None) -> bool:
        return params is not None and self.key(params) not in self.asked

    def propose(self) -> tuple[dict[str, Any], dict] | None:
        for name in self.owner.order:
            out = getattr(self, name)()
            if out is not None:
                return out
        if self.rng.rand() >= self.owner._local_share or not self.done:
            return None
        return self.local()

    def moved(self, params: dict[str, Any], steps: dict[str, list]) -> dict[str, Any] | None:
        out = {n: params[n] for n in self.space}
        for name, step in steps.items():
            if name not in self.space:
                continue
            value = _apply(self.space[name], out[name], step)
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
    def front(self) -> list[FrozenTrial]:
        return pareto(self.done, self.signs) if self.done else []

    @cached_property
    def front_gains(self) -> np.ndarray:
        return self.gains(self.front) if self.front else np.zeros(0)

    @cached_property
    def gaining_numbers(self) -> set[int]:
        return {t.number for t, g in zip(self.front, self.front_gains) if g > 0}

    def probe_from(self, center: FrozenTrial | None):
        if center is None:
            return None
        here = self.origin(center)
        for probe in self.owner._probes:
            steps = {n: s for n, s in probe.items() if n in self.space}
            params = self.moved(here, steps)
            if steps and params != here:
                if self.fresh(params):
                    return params, {"kind": "probe", "parent": center.number, "steps": steps}
        return None

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
        by_number = {t.number: t for t in self.done}
        for t, m in reversed(self.moves):
            numeric = {n: s for n, s in m["steps"].items() if s[0] in "x+"}
            parent = by_number.get(m["parent"])
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

    def shrink(self):
        """Half of a probe's or extension's move that traded one objective for another
        (or did not start), from its parent, while the step is large (a compass search)."""
        for t, m, numeric, parent, gaining in self.numeric_moves():
            if m["kind"] == "local" or t.number in gaining or not (
                    parent.number in gaining
                    or (parent is self.default and self.owner.shrink_from_default)):
                continue
            mixed = not started(t) or not all(
                a >= b for a, b in zip(self.vector(t), self.vector(parent)))
            steps = _halved(numeric)
            params = self.moved(self.origin(parent), steps)
            if mixed and _big(steps, self.space) and self.fresh(params):
                return params, {"kind": "extend", "parent": parent.number, "steps": steps}
        return None

    def local(self):
        front, weights = self.front, self.shares()
        names = [n for n, d in self.space.items() if _movable(d)]
        for _ in range(50):
            start = front[self.rng.choice(len(front), p=weights)]
            here = self.origin(start)
            k = min(len(names), int(self.rng.choice([1, 2, 3], p=[0.55, 0.3, 0.15])))
            steps = {}
            for name in self.rng.choice(names, size=k, replace=False):
                step = _random_step(self.space[name], here[name], self.rng)
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

    def vector(self, t: FrozenTrial) -> tuple[float, ...]:
        return tuple(s * v for s, v in zip(self.signs, t.values))

    def gains(self, front: list[FrozenTrial]) -> np.ndarray:
        """Each front point's exclusive hypervolume above the default made ``MARGIN``
        worse (or the front's nadir when the default did not start)."""
        pts = [self.vector(t) for t in front]
        if self.default is not None and started(self.default):  # a margin: ties gain too
            ref = tuple(v + MARGIN * abs(v) for v in self.vector(self.default))
        else:
            ref = tuple(max(p[i] for p in pts) + 1e-9 for i in range(len(self.signs)))
        unique = sorted(set(pts))  # a repeated point shares its gain, not loses it
        total = hypervolume(unique, ref)
        own = {p: total - hypervolume([q for q in unique if q != p], ref) for p in unique}
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
