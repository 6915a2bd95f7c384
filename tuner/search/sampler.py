"""Sampler choice: the study file's ``search.sampler`` -> an Optuna sampler.

``auto`` resolves to the sampler that won the search-efficiency benchmark
(``make bench-search``; see docs/search.md and bench/results/search.md).
"""

from __future__ import annotations

import importlib.util
import sys
import warnings

import optuna

from tuner.errors import SamplerUnavailable, UsageError
from tuner.search.front import OBJECTIVES, FrontSampler, FrontSettings
from tuner.spec.study import DEFAULT_OBJECTIVES
from tuner.trials.reference import rule_for

AUTO = "front"
NAMES = ("front", "tpe", "gp", "botorch", "nsga2", "random")
# Without a study's settings, the front sampler's worst values of the default objectives
# (no throughput, a p99 ITL of a second), its reference before the default has run
WORST = (0.0, 1000.0)


# The optional packages a sampler imports when it is built: (module, what pip installs).
NEEDS = {"gp": (("torch", "torch"), ("scipy", "scipy")),
         "botorch": (("optuna_integration", "optuna-integration"), ("botorch", "botorch"))}


def resolve(name: str) -> str:
    return AUTO if name == "auto" else name


def require(name: str, objectives: int | None = None) -> None:
    """Refuse a sampler whose packages are missing (``SamplerUnavailable``, exit 2), or
    one that cannot serve the study's number of ``objectives`` (``UsageError``, exit 2), so
    a study file that names one fails at ``tuner study create``, not in every worker."""
    given, name = name, resolve(name)
    if name == "front" and objectives is not None and objectives not in OBJECTIVES:
        said = "" if given == name else f" (the {name} sampler)"
        raise UsageError(f"search.sampler = {given!r}{said} serves 1 to {max(OBJECTIVES)} "
                         f"objectives; this study has {objectives}: give fewer objectives "
                         "or choose another sampler (search.sampler = \"tpe\" or \"nsga2\")")
    missing = [pkg for module, pkg in NEEDS.get(name, ()) if not _installed(module)]
    if missing:
        raise SamplerUnavailable(f"search.sampler = {name!r} needs {' and '.join(missing)}: "
                                 f"pip install {' '.join(missing)} (or choose another sampler)")


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported. One already imported counts as is: after its
    first import optuna_integration is a lazy module whose ``__spec__`` is None, and
    ``find_spec`` then raises ValueError (the second BoTorch study of one process)."""
    return module in sys.modules or importlib.util.find_spec(module) is not None


def make_sampler(name: str, seed: int | None, n_startup_trials: int = 8, *,
                 constant_liar: bool = True, front=None) -> optuna.samplers.BaseSampler:
    """A sampler that reads the trials' constraints (``trial.set_constraint``); TPE also
    knows about running trials (constant liar) unless ``constant_liar`` is False.
    ``front``: the front sampler's settings (``tuner.search.FrontSettings.for_study``);
    without them it scores the default objectives against a share and a multiple of the
    default's values (``tuner.trials.reference``), ``WORST`` before the default has run."""
    name = resolve(name)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if name == "front":
        if front is None:
            front = FrontSettings(rule_for(DEFAULT_OBJECTIVES, {}, {}, WORST),
                                  tuple(o.metric for o in DEFAULT_OBJECTIVES))
        return FrontSampler(front, seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                          constant_liar=constant_liar,
                                          n_startup_trials=n_startup_trials)
    require(name)
    if name == "gp":
        # reads the trials' constraints (set_constraint) itself; the space's log scales
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_startup_trials,
                                         deterministic_objective=False)
    if name == "botorch":
        from optuna_integration import BoTorchSampler

        return BoTorchSampler(seed=seed, n_startup_trials=n_startup_trials)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(8, n_startup_trials))
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}; known: auto, {', '.join(NAMES)}")
