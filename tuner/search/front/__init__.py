"""The default sampler: Bayesian optimisation of the whole front of the study's one, two
or three objectives (``OBJECTIVES``), shaped as Optuna's GP sampler is: ``sampler``
speaks Optuna's protocol, and each mechanism is a module.

    history       trials -> one frozen History per proposal (pure)
    probes        the start-up schedule: moves from the default the tuning guides name
    model         a process per objective (its Box-Cox power) and one of feasibility
    gp, encoding  the Gaussian process on the unit cube the configurations are encoded on
    candidates    trust region around the measured front, repair, freshness
    acquisition   expected (hypervolume) improvement, an end of the front, the choice
    proposal      the next probe, else the model's proposal
    settings      every number it uses, with why (``FrontSettings``)

It learns from the told trials only, never the engine: a trial's engine report counts
through ``History.echoes`` (``tuner.space.unreached``). Each proposal's move, with the
parameters proposed, is kept in the trial's system attribute ``front:move``.
"""

from tuner.search.front.acquisition import choose
from tuner.search.front.history import feasible, origin, record_of, started
from tuner.search.front.sampler import FrontSampler
from tuner.search.front.settings import MOVE, OBJECTIVES, PROBES, STARTS, FrontSettings

__all__ = ["MOVE", "OBJECTIVES", "PROBES", "STARTS", "FrontSampler", "FrontSettings",
           "choose", "feasible", "origin", "record_of", "started"]
