"""Every number the front sampler uses, each with why (``FrontSettings``), and the study's
score it is built with (``FrontSettings.for_study``)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, Mapping

from tuner.space import build_space, repair
from tuner.space.compile_grid import snap
from tuner.space.distributions import clip
from tuner.space.levers import BUDGET, SEQUENCES
from tuner.trials.reference import ReferenceRule, study_rule

MOVE = "front:move"  # the trial's system attribute that holds its proposal's move
OBJECTIVES = (1, 2, 3)  # the numbers of objectives the sampler serves
STARTS = "starts"  # the constraint told > 0 when a configuration did not start

PROBES: tuple[Mapping[str, float], ...] = (
    {BUDGET: 0.125, SEQUENCES: 0.125},  # towards low latency
    # the article's chunked launch: its budget (a 32nd of the default's 8,192) and, as vLLM
    # runs that launch, the sequences capped at the budget (the rules' budget-covers-seqs)
    {BUDGET: 1 / 32},
    {BUDGET: 0.25},
    {SEQUENCES: 0.25},
    # the one-flag probes mirrored: the other side of the parent (a response need not be
    # monotonic; clipped to the space, so a flag already at its top makes no probe)
    {BUDGET: 4.0},
    {SEQUENCES: 4.0},
)
CORNER = 1  # the index in PROBES of the article's low-latency corner (``corner_probe``)
MIRRORED = (4, 5)  # the indices in PROBES of the mirrored probes (``mirrored_probes``)


@dataclass(frozen=True)
class FrontSettings:
    """What the sampler needs of the study and how hard it looks.

    ``reference``: the study's score (``tuner.trials.reference.study_rule``);
    ``metrics``: the objectives' metric names (to read a trial's measured spread).

    The plain algorithm is probes from the default, then expected (hypervolume)
    improvement times the probability of feasibility under Gaussian processes, over
    candidates in a trust region around the measured front. Each rule beyond it is a
    boolean below (True: on, the default; ``rules()`` names them; docs/search.md says what
    each buys, measured by bench/search_ablation.py)."""

    reference: ReferenceRule
    metrics: tuple[str, ...] = ()
    # params -> the parameters the space's rules repair them to (None: no valid
    # configuration near): candidates are scored where they will run
    repair: Callable[[dict], dict | None] | None = None
    # params -> the same with vLLM's compile-key flags on the space's grid
    # (``tuner.space.compile_grid``): a probe or a random draw proposes what will run
    grid: Callable[[dict], dict] | None = None
    # -- probes (``probes``)
    probes: tuple[Mapping[str, float], ...] = PROBES
    jitter: float = 0.25  # log-scale jitter of a probe's factors, drawn from the seed
    jitter_probes: bool = True  # rule: each probe's factors jittered (``jitter``) by the seed
    corner_probe: bool = True  # rule: a probe to the article's low-latency corner (``CORNER``)
    mirrored_probes: bool = True  # rule: the one-flag probes mirrored upwards (``MIRRORED``)
    # rule: the probes also move from each started baseline in another categorical cell
    # when the rules move the default's own probes out of its cell (or in another mode)
    regimes: bool = True
    beaten_parents: bool = True  # rule: a parent beaten on every objective gets no probes
    # a proposal another worker holds is made again, at most this many times per probe
    claims: int = 4
    claim_check: bool = True  # rule: a worker proposes again when another holds its proposal
    # -- history (``history``)
    as_run: bool = True  # rule: a trial is where it ran (its effective flags), not as asked
    echoes: bool = True  # rule: a cap a trial's engine never reached, moved, counts as measured
    # -- models (``model``)
    min_trials: int = 4  # measured trials before the model proposes
    # mode switches (``Param.mode``): each side of them is a cell of the surrogates' kernel
    cells: tuple[str, ...] = ()
    cell_kernel: bool = True  # rule: the kernel's cell term over ``cells`` (else a plain one)
    box_cox: bool = True  # rule: each objective on its likeliest Box-Cox power (else the log)
    measured_spread: bool = True  # rule: confirmation runs' spread is the noise floor
    slo_scale: bool = True  # rule: each SLO's violation on a signed log scale (else as is)
    believer: bool = True  # rule: trials in flight are told at the model's mean (Kriging believer)
    floor: float = 1e-9  # the least objective value: the Box-Cox powers need positive ones
    started_noise: float = 0.01  # noise floor of the +1/-1 process of starting
    slo_noise: float = 1e-4  # noise floor of each SLO's process (signed log scale)
    sd_floor: float = 1e-6  # the least posterior sd a probability divides by
    # -- candidates (``candidates``)
    candidates: int = 256  # candidates drawn in the trust region per proposal
    # TuRBO's initial side of the trust region on the unit cube (kept fixed: a study's
    # ten to twenty model proposals would leave it near its start)
    region: float = 0.8
    region_lengths: tuple[float, float] = (0.005, 2.0)  # TuRBO's bounds on the weights
    region_flip: float = 0.1  # a categorical flag takes a random value in the region
    weighted_region: bool = True  # rule: the region's sides weighed by the length scales
    repair_candidates: bool = True  # rule: candidates are scored where the rules will run them
    near: float = 0.005  # unit-cube distance within which a configuration was asked
    same: float = 1e-9  # unit-cube distance of one value (a categorical's)
    # -- acquisition (``acquisition``)
    draws: int = 32  # posterior samples per candidate
    joint_front: bool = True  # rule: the front drawn jointly with each candidate (noisy EHVI)
    end_pushes: bool = True  # rule: one model proposal in ``ends`` pushes an end of the front
    ends: int = 3  # one model proposal in this many pushes an end of the front
    # rule: while no trial is feasible, or nothing is expected to add, the likeliest feasible
    feasible_first: bool = True
    nudge: float = 1e-6  # the posterior spread's weight when the odds of feasibility choose

    @classmethod
    def rules(cls) -> tuple[str, ...]:
        """The names of the rules' switches (every boolean field)."""
        return tuple(f.name for f in fields(cls) if f.type in (bool, "bool"))

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

        def gridded(params: dict) -> dict:
            whole = space.complete(params) if set(dists) <= set(params) else params
            return {**params, **{n: v for n, v in snap(space, whole).items()
                                 if n in space.grids and n in params}}
        modes = tuple(n for n in dists if (p := space.param(n)) is not None and p.mode)
        return cls(study_rule(spec), tuple(o.metric for o in spec.objectives), repair=repaired,
                   grid=gridded, cells=modes)
