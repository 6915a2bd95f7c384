"""The default sampler: Bayesian optimisation of the whole throughput vs latency front.

It serves one, two or three objectives (``OBJECTIVES``), their directions and metrics the
study's; the text below speaks of the default two (throughput, p99 ITL). Three: the same
expected hypervolume improvement (``tuner.search.acquisition``), each end pushed in turn.
One: expected improvement over the best feasible value (the move's aim ``ei``), no ends.

``FrontSampler`` learns from the told trials only (never the engine):

1. **probes** (``FrontSettings.probes``): after the enqueued baselines, a few moves from
   the default that the tuning guides name. They go towards low latency (an eighth of the
   token budget and of the sequences), to the low-latency corner (the article's small
   chunked budget, with as many sequences as tokens), to a quarter of the budget and of
   the sequences, and mirrored (four times the budget and the sequences, where the space
   has room). Each factor is jittered by the seed (up to ``jitter`` on a log scale), so
   seeds run different trajectories; parallel workers take distinct probes.
   The probes keep the default's categorical flags, so they also move from the baselines
   that run where the default's probes never go (``View.parents``). Under rules that move
   the default into another categorical cell (the article's rules turn its prefix caching
   off), that is each started baseline that keeps the value taken. Under rules that leave
   it as it is, that is each started baseline in another mode (``Param.mode``). Either
   parent is skipped once a measured trial on the other side beats it on every objective.
2. then, once ``min_trials`` trials measured, a **model**: one Gaussian process per
   objective (on the Box-Cox power of its values that the likelihood prefers, the log
   or another, ``tuner.search.outputs``; ``tuner.search.surrogate``; a mode switch such as
   chunked prefill, ``Param.mode``, also gets a kernel term per side with its own length
   scales, when the likelihood says so) and one of
   feasibility (started and every SLO met, +1/-1, from every told trial, so
   configurations that do not start teach it too); the proposal maximises the expected
   hypervolume improvement (``tuner.search.acquisition``) over the study's reference
   point (``tuner.trials.reference``: the whole front the SLOs allow), times the
   probability of feasibility, over candidates drawn in a trust region around the measured
   front (``tuner.search.region``) and moves around it (while no
   measured trial is feasible, the probability of feasibility alone: an improvement over an
   empty front rewards a large box whatever its odds; as Optuna's constrained GPSampler
   does, after Gelbart et al., 2014). One
   proposal in ``ends`` instead pushes one end of the front (the first objective's, then
   the second's, in turn: with the default objectives the best throughput, then the best
   p99 ITL; each while the other stays inside the reference): the front is
   covered from both ends, where a point adds little volume but answers a user's
   tightest latency limit (``tuner best --max-itl-p99``).

The engine's report: where a trial's ``/metrics`` show a cap it never reached (fewer
requests running than the sequences allowed, a KV cache never nearly full, prefix caching
that found nothing cached; ``tuner.search.binding``), the configurations with that cap moved
count as measured with the trial's values (``View.unbound``): the objective and SLO models
learn them, and no proposal goes there, nor anywhere in the box they span with the trial
(``View.unbound_boxes``: such caps moved part of the way, or several at once).

Noise: each measured point counts on the front as if it were better by its spread (the
larger of the trial's measured relative spread, the model's learned noise and ``tie``),
so a candidate must beat it by more than that to add volume: differences inside the
spread are ties. Parallel workers: trials in flight are told to the model at its own
prediction (Kriging believer) and join the front, so the next proposal is elsewhere and
still model-based; a trial another worker is still asking (Optuna writes its parameters
after the sampler returns) counts by the parameters its move holds, and a proposal that
one of those already holds is made again (each worker writes its move, then reads the
others'). The models learn from the flags a trial ran with (what the rule set
repaired its parameters to), and each candidate is repaired by the space's rules before it
is scored, so it is scored where it will run; nothing within ``near`` of an asked
configuration is proposed again.
Each proposal's move, with the parameters proposed, is kept in the trial's system
attribute ``front:move``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner import optuna_adapter
from tuner.search.acquisition import end_improvement, expected_improvement, joint_draws
from tuner.search.binding import unbound_moves
from tuner.search.outputs import fit_power, inverse, relative
from tuner.search.region import trust_region
from tuner.search.steps import clip
from tuner.search.surrogate import Encoding, fit
from tuner.space import build_space, repair
from tuner.trials.pareto import nondominated
from tuner.trials.queries import from_frozen
from tuner.trials.record import Outcome, TrialRecord
from tuner.trials.reference import ReferenceRule, study_rule

MOVE = "front:move"
OBJECTIVES = (1, 2, 3)  # the numbers of objectives the sampler serves (``improvement``)
STARTS = "starts"
PROBES: tuple[Mapping[str, float], ...] = (
    {"max_num_batched_tokens": 0.125, "max_num_seqs": 0.125},  # towards low latency
    # the article's chunked launch: its budget (a 32nd of the default's 8,192) and, as vLLM
    # runs that launch, the sequences capped at the budget (the rules' budget-covers-seqs)
    {"max_num_batched_tokens": 1 / 32},
    {"max_num_batched_tokens": 0.25},
    {"max_num_seqs": 0.25},
    # the one-flag probes mirrored: the other side of the parent (a response need not be
    # monotonic; clipped to the space, so a flag already at its top makes no probe)
    {"max_num_batched_tokens": 4.0},
    {"max_num_seqs": 4.0},
)


@dataclass(frozen=True)
class FrontSettings:
    """What the sampler needs of the study and how hard it looks.

    ``reference``: the study's score (``tuner.trials.reference.study_rule``);
    ``metrics``: the objectives' metric names (to read a trial's measured spread)."""

    reference: ReferenceRule
    metrics: tuple[str, ...] = ()
    # params -> the parameters the space's rules repair them to (None: no valid
    # configuration near): candidates are scored where they will run
    repair: Callable[[dict], dict | None] | None = None
    probes: tuple[Mapping[str, float], ...] = PROBES
    jitter: float = 0.25  # log-scale jitter of a probe's factors, drawn from the seed
    min_trials: int = 4  # measured trials before the model proposes
    candidates: int = 256  # candidates drawn in the trust region per proposal
    around: int = 16  # moves around each front point per proposal
    draws: int = 32  # posterior samples per candidate
    ends: int = 3  # one model proposal in this many pushes an end of the front
    tie: float = 0.01  # relative differences below this are ties, without a measured spread
    near: float = 0.005  # unit-cube distance within which a configuration was asked
    # the probes also move from each started baseline in another categorical cell when the
    # rules move the default's own probes out of its cell
    regimes: bool = True
    # mode switches (``Param.mode``): each side of them is a cell of the surrogates' kernel
    cells: tuple[str, ...] = ()

    @classmethod
    def for_study(cls, spec, space=None) -> "FrontSettings":
        """The settings of a study spec; ``space``: its ``SearchSpace`` (built when not
        given), whose rules repair each candidate before it is scored."""
        space = space or build_space(spec)
        dists = space.distributions()

        def repaired(params: dict) -> dict | None:
            fixed = repair(space, space.complete(params))
            if fixed.infeasible:
                return None
            out = {n: clip(d, fixed.flags[n]) for n, d in dists.items() if n in fixed.flags}
            return out if None not in out.values() and len(out) == len(dists) else None
        modes = tuple(n for n in dists if (p := space.param(n)) is not None and p.mode)
        return cls(study_rule(spec), tuple(o.metric for o in spec.objectives), repair=repaired,
                   cells=modes)


def record_of(t: FrozenTrial) -> TrialRecord:
    """The trial's typed record (its user attributes read once)."""
    return from_frozen(t)


def started(t: FrozenTrial) -> bool:
    """Measured: complete with finite values, ``starts`` <= 0, not infeasible."""
    return (t.state == TrialState.COMPLETE and t.values is not None
            and all(math.isfinite(v) for v in t.values)
            and (t.constraints or {}).get(STARTS, 0.0) <= 0
            and record_of(t).outcome != Outcome.INFEASIBLE)


def feasible(t: FrozenTrial) -> bool:
    return started(t) and all(v <= 0 for v in (t.constraints or {}).values())


def origin(t: FrozenTrial, space: Mapping[str, BaseDistribution]) -> dict[str, Any]:
    """What ``t`` ran with, in the space's terms: its effective flags where they are valid
    values, else its parameters."""
    flags = record_of(t).flags
    out = {}
    for name, dist in space.items():
        value = clip(dist, flags[name]) if name in flags else None
        out[name] = value if value is not None else t.params.get(name)
    return out


_erf = np.vectorize(math.erf)


def _probability(X: np.ndarray, y: np.ndarray, running: np.ndarray, noise: float,
                 cells: np.ndarray | None = None):
    """P(value > 0) under a process fitted to ``y`` (constant when ``y`` is)."""
    if len(y) == 0 or np.ptp(y) == 0:
        p = 1.0 if len(y) == 0 or y[0] > 0 else 0.0
        return lambda c: np.full(len(c), p)
    gp = fit(X, y, noise_floor=noise, cells=cells).believing(running)

    def prob(c: np.ndarray) -> np.ndarray:
        mu, sd = gp.predict(c)
        return 0.5 * (1.0 + _erf(mu / np.maximum(sd, 1e-6) / math.sqrt(2.0)))
    return prob


def _geometric(lengths: Sequence[np.ndarray]) -> np.ndarray:
    """The geometric mean of the processes' length scales, dimension by dimension."""
    product = lengths[0]
    for more in lengths[1:]:
        product = product * more
    return {1: np.asarray, 2: np.sqrt, 3: np.cbrt}[len(lengths)](product)


def choose(gain: np.ndarray, pf: np.ndarray, sd: np.ndarray, any_feasible: bool) -> int:
    """The candidate to propose: the largest expected improvement times the probability of
    feasibility ``pf``; while no measured trial is feasible, or where nothing is expected
    to add, the likeliest to be feasible (``sd``, the posterior spread, breaks ties). With
    an empty front the improvement is the whole box a candidate dominates, so the product
    would favour a large box at long odds over a likely feasible point (Optuna's
    constrained GPSampler also drops the improvement then; Gelbart et al., 2014)."""
    score = pf * gain
    if not any_feasible or score.max() <= 0:
        score = pf + 1e-6 * sd
    return int(np.argmax(score))


def _moves(trials: Sequence[FrozenTrial]) -> list[Mapping[str, Any]]:
    return [t.system_attrs[MOVE] for t in trials if isinstance(t.system_attrs.get(MOVE), dict)]


def _pending(trials: Sequence[FrozenTrial], space: Mapping[str, BaseDistribution]
             ) -> list[dict[str, Any]]:
    """What the trials still being asked (RUNNING, their parameters not yet written: Optuna
    writes them after the sampler returns) proposed, from their moves."""
    out = []
    for t in trials:
        move = t.system_attrs.get(MOVE)
        params = move.get("params") if isinstance(move, dict) else None
        if (t.state == TrialState.RUNNING and isinstance(params, dict)
                and not set(space) <= set(t.params) and set(space) <= set(params)):
            out.append({n: params[n] for n in space})
    return out


def _plain(value: Any) -> Any:
    """A proposed value as JSON stores it (numpy scalars as Python's)."""
    return value.item() if isinstance(value, np.generic) else value


def _probes_held(moves: Sequence[Mapping[str, Any]]) -> set[tuple[Any, Any]]:
    """The probes these moves hold, as (parent trial, probe index)."""
    return {(m.get("parent"), m.get("probe")) for m in moves if m.get("kind") == "probe"}


class FrontSampler(optuna.samplers.BaseSampler):
    """Probes, then expected hypervolume improvement under a GP (see the module)."""

    def __init__(self, settings: FrontSettings, seed: int | None = None) -> None:
        self.settings = settings
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._random = optuna.samplers.RandomSampler(seed=seed)

    # optuna's sampler protocol ------------------------------------------------------
    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return optuna.search_space.intersection_search_space(
            study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        self._serves(len(study.directions))
        if not search_space:
            return {}
        for _ in range(len(self.settings.probes) * 4 + 1):
            others = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
            trials = [t for t in others if set(search_space) <= set(t.params)]
            # a trial another worker is asking has its move before its parameters
            view = View(self.settings, trials, study.directions, search_space, _moves(others),
                        pending=_pending(others, search_space))
            out = view.probe(self._seed) or view.model(self._rng)
            if out is None:
                return {}
            params, move = out
            move = {**move, "params": {k: _plain(v) for k, v in params.items()}}
            optuna_adapter.set_trial_system_attr(study, trial, MOVE, move)
            if not self._claimed(study, trial, move, view):
                return params
        return {}

    def _serves(self, count: int) -> None:
        """Refuse a study of a number of objectives the sampler cannot serve, or one its
        reference point was not made for (``tuner study create`` refuses the first)."""
        if count not in OBJECTIVES:
            raise ValueError(f"the front sampler serves {', '.join(map(str, OBJECTIVES))} "
                             f"objectives, not {count}")
        if len(self.settings.reference.bounds) != count:
            raise ValueError(f"the front sampler's reference has "
                             f"{len(self.settings.reference.bounds)} objectives, the study "
                             f"{count}: give FrontSettings.for_study(spec)")

    @staticmethod
    def _claimed(study, trial, move, view: "View") -> bool:
        """Whether another trial holds this proposal: the same probe, or (any move) the same
        configuration that a trial still being asked proposed. Workers that ask at the same
        moment each write their move, then read the others', so at least one of two sees the
        other's and proposes again, with the other's proposal counted as asked (a probe
        clipped to the space's edge is the same configuration whatever its jitter)."""
        others = [t for t in study.get_trials(deepcopy=False) if t.number != trial.number]
        if move["kind"] == "probe" and (move.get("parent"), move.get("probe")) in \
                _probes_held(_moves(others)):
            return True
        pending = _pending(others, view.space)
        return bool(pending) and not View(view.s, [], (), view.space,
                                          pending=pending).unasked(move["params"])

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        self._random.reseed_rng()


class View:
    """One proposal's view of the study: asked configurations, data for the models."""

    powers: tuple[float, ...] = (0.0, 0.0)  # each objective's Box-Cox power (0: the log)

    def __init__(self, settings: FrontSettings, trials: Sequence[FrozenTrial], directions,
                 space: Mapping[str, BaseDistribution],
                 moves: Sequence[Mapping[str, Any]] | None = None,
                 pending: Sequence[Mapping[str, Any]] = ()) -> None:
        """``moves``: the proposals' moves (``front:move``) of every other trial, those
        still being asked included (default: the moves of ``trials``); ``pending``: the
        parameters those still being asked proposed (``_pending``), counted as asked and in
        flight."""
        self.s, self.space, self.enc = settings, space, Encoding(dict(space))
        self.cells = np.array([n in settings.cells for n in self.enc.names])
        self.moves = list(moves) if moves is not None else _moves(trials)
        self.maximise = np.array([d == optuna.study.StudyDirection.MAXIMIZE for d in directions])
        self.trials = trials
        asked = [self.enc.encode(t.params) for t in trials]
        asked += [self.enc.encode(origin(t, space)) for t in trials]
        if settings.repair is not None:  # a trial in flight has no flags yet: as it will run
            fixed = [settings.repair(dict(t.params)) for t in trials
                     if t.state == TrialState.RUNNING]
            asked += [self.enc.encode(f) for f in fixed if f is not None]
        self.pending = [dict(p) for p in pending]
        asked += [self.enc.encode(p) for p in self.pending]
        if settings.repair is not None:
            asked += [self.enc.encode(f) for f in (settings.repair(dict(p))
                                                   for p in self.pending) if f is not None]
        self.asked = np.array(asked).reshape(-1, len(self.enc.names))
        told = [t for t in trials if t.state == TrialState.COMPLETE
                and record_of(t).outcome != Outcome.DUPLICATE]
        self.measured = [t for t in told if started(t)]
        self.told = told
        self.echoes = self.unbound()
        # what a measured trial's engine showed it would measure alike: the box its
        # echoes span with it (the echoes themselves are its corners)
        self.boxes = self.unbound_boxes()
        self.running = [t for t in trials if t.state == TrialState.RUNNING]
        self.default = next((t for t in trials if record_of(t).baseline == "default"),
                            None)

    def fresh(self, X: np.ndarray) -> np.ndarray:
        """Rows of ``X`` not within ``near`` of an asked configuration."""
        if not len(self.asked):
            return np.ones(len(X), bool)
        cat = self.enc.categorical()
        d = np.abs(X[:, None, :] - self.asked[None, :, :])
        same = np.where(cat, d < 1e-9, d < self.s.near).all(-1)
        out = ~same.any(1)
        for rows in self.boxes:
            inside = (X >= rows.min(0) - self.s.near) & (X <= rows.max(0) + self.s.near)
            one_of = (np.abs(X[:, None, :] - rows[None, :, :]) < 1e-9).any(1)
            out &= ~np.where(cat, one_of, inside).all(-1)
        return out

    def unasked(self, params: Mapping[str, Any]) -> bool:
        """``params`` is fresh, as asked and as the rules will run it (two probes that the
        rules repair onto one configuration are one configuration)."""
        fixed = self.s.repair(dict(params)) if self.s.repair is not None else None
        rows = [self.enc.encode(params)] + ([self.enc.encode(fixed)] if fixed else [])
        return bool(self.fresh(np.array(rows)).all())

    # probes ------------------------------------------------------------------------
    def probe(self, seed: int | None):
        done = _probes_held(self.moves)
        for parent in self.parents():
            here = origin(parent, self.space)
            for i, probe in enumerate(self.s.probes):
                if (parent.number, i) in done:
                    continue
                jitter = np.random.default_rng([i, 0 if seed is None else seed + 1])
                params = dict(here)
                for name, factor in probe.items():
                    if name in self.space:
                        f = factor * math.exp(jitter.uniform(-self.s.jitter, self.s.jitter))
                        params[name] = clip(self.space[name], here[name] * f)
                if params != here and self.unasked(params):
                    return params, {"kind": "probe", "probe": i, "parent": parent.number}
        return None

    def parents(self) -> list[FrozenTrial]:
        """The trials the probes move from: the default, then (``regimes``), when the rules
        take a categorical value of the default's from its probes (the article's rules:
        prefix caching, since vLLM's default also runs chunked prefill), each started
        baseline that keeps what they took and that the rules leave as it is (the article's
        launch without chunked prefill), so the probes run where that value is allowed;
        when they take nothing, each started baseline that the rules leave as it is in a
        mode (``FrontSettings.cells``) no parent runs, so the probes cover both sides of a
        mode switch; none that a measured trial on the other side already beats on every
        objective (the default counts when the rules took nothing from it)."""
        if self.default is None or not started(self.default):
            return []
        here = origin(self.default, self.space)
        mine, fixed = self.cell(here), self.cell(here, True)
        taken = {n: v for n, v in mine.items() if fixed[n] != v}
        out, cells = [self.default], [mine]
        if not self.s.regimes:
            return out
        for t in self.trials:
            if t is self.default or not record_of(t).baseline or not started(t):
                continue
            flags = origin(t, self.space)
            cell, repaired = self.cell(flags), self.cell(flags, True)
            if taken:  # keeps what the rules took, as the rules leave it
                apart = taken
                keeps = all(repaired[n] == v == cell[n] for n, v in taken.items())
            else:  # in a mode no parent runs, as the rules leave it
                apart = {n: cell[n] for n in self.s.cells if n in cell}
                keeps = bool(apart) and repaired == cell and all(
                    any(c[n] != v for n, v in apart.items()) for c in cells)
            if keeps and cell not in cells and not self.dominated(t, apart, bool(taken)):
                out.append(t)
                cells.append(cell)
        return out

    def dominated(self, t: FrozenTrial, taken: Mapping[str, Any],
                  changed: bool = True) -> bool:
        """Whether a measured trial without the ``taken`` values beats ``t`` on every
        objective: the other side of the choice already does better (``changed``: the
        rules change the default, so its values cannot be had and do not count)."""
        mine = np.where(self.maximise, -np.array(t.values), np.array(t.values))
        for other in self.measured:
            flags = self.cell(origin(other, self.space))
            if (changed and other is self.default) or all(flags[n] == v
                                                          for n, v in taken.items()):
                continue
            theirs = np.where(self.maximise, -np.array(other.values), np.array(other.values))
            if (theirs <= mine).all() and (theirs < mine).any():
                return True
        return False

    def cell(self, params: Mapping[str, Any], repaired: bool = False) -> dict[str, Any]:
        """The categorical flags of ``params`` (``repaired``: as the space's rules repair
        them)."""
        if repaired and self.s.repair is not None:
            params = self.s.repair(dict(params)) or params
        return {n: params[n] for n, c in zip(self.enc.names, self.enc.categorical()) if c}

    # the model ---------------------------------------------------------------------
    def model(self, rng: np.random.Generator):
        if len(self.measured) < self.s.min_trials:
            return None
        X = self.measured_x
        values = np.maximum(np.abs(np.array([t.values for t in self.measured], float)), 1e-9)
        spread = self.spread()
        Xe, ve = self.echoed(X, values)
        fits = [fit_power(Xe, ve[:, j], spread[j], self.cells) for j in range(self.count)]
        gps = [gp for gp, _ in fits]
        self.powers = tuple(power for _, power in fits)
        running = np.array([self.enc.encode(t.params) for t in self.running]
                           + [self.enc.encode(p) for p in self.pending]).reshape(-1, X.shape[1])
        gps = [gp.believing(running) for gp in gps]
        feas = self.feasibility(running)
        cands = self.candidates(X, rng, _geometric([gp.lengths for gp in gps]))
        if not len(cands):
            return None
        typical = np.median(values, 0)
        ties = np.array([max(spread[j], relative(gps[j].noise_sd, typical[j], self.powers[j]),
                             self.s.tie) for j in range(self.count)])
        ok = np.array([feasible(t) for t in self.measured], bool)
        at = np.vstack([X[ok], running])  # the front's points: feasible, then in flight
        preds = [gp.predict(cands) for gp in gps]  # (mean, sd) of each objective
        fronts, draws = self.draws(at, np.arange(len(at)) < ok.sum(), gps, cands, preds, ties,
                                   rng)
        ref, aim = self.reference(), self.aim()
        gain = (end_improvement(draws, fronts, ref, int(aim[-1])) if aim.startswith("end")
                else expected_improvement(draws, fronts, ref))
        sd = np.stack([p[1] for p in preds], 1)
        pf = feas(cands)
        best = choose(gain, pf, sd.sum(1), any(feasible(t) for t in self.measured))
        return self.enc.decode(cands[best]), {"kind": "model", "aim": aim,
                                              "gain": float(gain[best]),
                                              "feasible": float(pf[best])}

    @property
    def count(self) -> int:
        """The study's number of objectives."""
        return len(self.maximise)

    def aim(self) -> str:
        """What this model proposal maximises: the expected hypervolume improvement, or,
        one proposal in ``ends``, one end of the front (objective 0, then 1, ..., in turn);
        with one objective its expected improvement (``ei``: the front has no ends)."""
        if self.count == 1:
            return "ei"
        n = sum(1 for m in self.moves if m.get("kind") == "model")
        if n % self.s.ends != self.s.ends - 1:
            return "ehvi"
        return f"end:{(n // self.s.ends) % self.count}"

    def objectives(self, z: np.ndarray) -> np.ndarray:
        """Values on the processes' scales (``powers``) -> minimised objectives (a
        maximised one negated)."""
        v = np.stack([inverse(z[..., j], self.powers[j]) for j in range(z.shape[-1])], -1)
        return np.where(self.maximise, -v, v)

    def reference(self) -> np.ndarray:
        default = tuple(self.default.values) if self.default is not None and started(
            self.default) else None
        ref = np.array(self.s.reference.point(default), float)
        return np.where(self.maximise, -ref, ref)

    def draws(self, at, measured, gps, cands, preds, ties, rng) -> tuple[np.ndarray, np.ndarray]:
        """Posterior draws of the front (the processes at ``at``) and of the candidates
        (``preds``: each process's mean and sd there), jointly (``joint_draws``): (k x points
        x d, k x candidates x d; d objectives), minimised; each ``measured`` point of the
        front made better by its ties."""
        k = self.s.draws
        normal = np.random.default_rng(rng.integers(2 ** 32))
        d = self.count
        z_f, z_c = normal.standard_normal((d, k, len(at))), normal.standard_normal((d, k, 1))
        fronts, draws = [], []
        for j, (gp, (mean_c, sd_c)) in enumerate(zip(gps, preds)):
            mean_f, _ = gp.predict(at)
            f, c = joint_draws(mean_f, gp.covariance(at, at), mean_c, gp.covariance(at, cands),
                               sd_c ** 2, z_f[j], z_c[j])
            fronts.append(f)
            draws.append(c)
        return (self.better(np.stack(fronts, -1), measured, ties),
                self.objectives(np.stack(draws, -1)))

    def better(self, z: np.ndarray, measured: np.ndarray, ties: np.ndarray) -> np.ndarray:
        """Front points' values on the processes' scales (... x n x d) -> minimised
        objectives, each ``measured`` point made better by its ties, relative (a candidate
        must beat it by more to add volume)."""
        factor = np.exp(measured[:, None] * np.where(self.maximise, ties, -ties))
        return self.objectives(z) * factor

    def spread(self) -> np.ndarray:
        """Each objective's median relative spread (range over median) over the measured
        trials repeated at least twice (the record's ``spread``: confirmation runs), else 0."""
        out = []
        for m in self.s.metrics or ("",) * self.count:
            spreads = [record_of(t).spread.get(m) for t in self.measured]
            vals = [sp.rel for sp in spreads if sp is not None and sp.n > 1]
            out.append(float(np.median(vals)) if vals else 0.0)
        return np.array(out[:self.count])

    @cached_property
    def measured_x(self) -> np.ndarray:
        """Where each measured trial ran (``origin``), encoded: one row each."""
        return np.array([self.enc.encode(origin(t, self.space))
                         for t in self.measured]).reshape(-1, len(self.enc.names))

    def unbound(self) -> list[tuple[int, np.ndarray]]:
        """(index in ``measured``, encoded configuration) for each configuration that a
        measured trial's engine showed would measure the same (``tuner.search.binding``:
        a cap it never reached, moved), where the space's rules leave it as it is."""
        out = []
        for i, t in enumerate(self.measured):
            here = origin(t, self.space)
            told = record_of(t)
            for params in unbound_moves(here, told.server, self.space, told.flags):
                fixed = self.s.repair(dict(params)) if self.s.repair is not None else params
                x = self.enc.encode(params)
                if fixed is not None and np.allclose(self.enc.encode(fixed), x):
                    out.append((i, x))
        return out

    def unbound_boxes(self) -> list[np.ndarray]:
        """For each measured trial with ``unbound`` configurations: its row and theirs (one
        each). Each cap was unreached on its own, so the whole box they span counts as
        measured: every numeric flag between the rows' least and greatest values, every
        categorical flag at one of the rows' values (a cap moved part of the way to its
        unreached end, or two such caps moved at once). Only the configurations the rules
        leave as they are span it, as only they are the models' data: a box of every
        unreached move (under the article's rules, the default's sequences with prefix
        caching off) scored lower on the article's pairs
        (docs/decisions/0016-box-of-unreached-caps.md)."""
        rows: dict[int, list[np.ndarray]] = {}
        for i, x in self.echoes:
            rows.setdefault(i, [self.measured_x[i]]).append(x)
        return [np.array(r) for r in rows.values()]

    def echoed(self, X: np.ndarray, y: np.ndarray, rows: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """The measured trials' data (``X``, ``y``: one row each) with the ``unbound``
        configurations added, each with its trial's row of ``y``; ``rows``: the trials to
        keep (bool each; default all)."""
        keep = np.ones(len(X), bool) if rows is None else rows
        echo = [(i, x) for i, x in self.echoes if keep[i]]
        if not echo:
            return X[keep], y[keep]
        return (np.vstack([X[keep], [x for _, x in echo]]),
                np.vstack([y[keep], [y[i] for i, _ in echo]]))

    def feasibility(self, running: np.ndarray):
        """P(started) x P(every SLO met) as a function of candidates: one process of
        +1/-1 (started or not) over every told trial, one per SLO constraint over the
        started ones (its value, limit subtracted, on a signed log scale), so a study whose
        trials all miss an SLO still learns which way it gets met."""
        models = []
        X = np.array([self.enc.encode(origin(t, self.space)) for t in self.told])
        y = np.array([1.0 if started(t) else -1.0 for t in self.told])
        models.append(_probability(X, y, running, 0.01, self.cells))
        keys = sorted({k for t in self.measured for k in (t.constraints or {}) if k != STARTS})
        for key in keys:
            has = np.array([key in (t.constraints or {}) for t in self.measured])
            c = np.array([float((t.constraints or {}).get(key, 0.0)) for t in self.measured])
            Xc, c = self.echoed(self.measured_x, c[:, None], has)
            c = c[:, 0]
            scale = float(np.median(np.abs(c))) or 1.0
            models.append(_probability(Xc, -np.sign(c) * np.log1p(np.abs(c) / scale),
                                       running, 1e-4, self.cells))

        def prob(cands: np.ndarray) -> np.ndarray:
            return np.prod([m(cands) for m in models], axis=0)
        return prob

    def onfront(self) -> list[int]:
        """The measured trials that no other measured trial dominates (indices)."""
        ys = np.array([t.values for t in self.measured])
        mins = np.where(self.maximise, -ys, ys)
        return nondominated(range(len(mins)), [tuple(m) for m in mins.tolist()])

    def candidates(self, X: np.ndarray, rng: np.random.Generator,
                   lengths: np.ndarray | None = None) -> np.ndarray:
        """Points in the trust region around the measured front (``tuner.search.region``,
        weighed by the processes' ``lengths``) and moves around it, snapped, repaired, not
        asked yet."""
        dim = X.shape[1]
        cat = self.enc.categorical()
        onfront = self.onfront()
        out = [trust_region(X[onfront], cat, lengths, self.s.candidates, rng)]
        for i in onfront:
            base = np.repeat(X[i][None], self.s.around, 0)
            move = rng.random(base.shape) < 0.4
            step = rng.normal(0.0, 0.1, base.shape)
            flip = rng.random(base.shape) < 0.1
            moved = np.where(cat, np.where(flip, rng.random(base.shape), base),
                             np.where(move, base + step, base))
            out.append(np.clip(moved, 0.0, 1.0))
        cands = np.array([self.enc.snap(x) for x in np.vstack(out)])
        if self.s.repair is not None:  # where the rules will run them
            fixed = [self.s.repair(self.enc.decode(x)) for x in cands]
            cands = np.array([self.enc.encode(f) for f in fixed if f is not None]).reshape(
                -1, dim)
        cands = np.unique(cands, axis=0)
        return cands[self.fresh(cands)]
