"""The effective search space of a study: the catalogue narrowed by the study file.

The space is static (every trial suggests every tuned parameter, with the same
distribution, in the same order) so that GP-based samplers can use all of them; Optuna's
GPSampler ignores a parameter whose distribution changes between trials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping

from optuna.distributions import (BaseDistribution, CategoricalDistribution,
                                  FloatDistribution, IntDistribution)

from tuner.space.defaults import vllm_defaults
from tuner.space.check import check_fixed, check_names, check_override
from tuner.space.compile_grid import compile_grids
from tuner.space.installed import engine_defaults, unusable
from tuner.numerics import is_lossy, lossy_flags, lossy_names, numerics
from tuner.space.params import CATALOGUE, Param, param
from tuner.space.rules import Context, RuleSet, rule_set

if TYPE_CHECKING:  # the study package imports this one
    from tuner.installed import Installed
    from tuner.spec.study import StudySpec

DEFAULT_HIGH = {"max_num_batched_tokens": 32768}


@dataclass(frozen=True)
class SearchSpace:
    """Tuned parameters (with their effective ranges), fixed values, vLLM's defaults,
    the rule set and its context."""

    params: tuple[Param, ...]
    fixed: Mapping[str, Any]
    defaults: Mapping[str, Any]
    context: Context
    rules: RuleSet
    names: tuple[str, ...] = field(default=())
    lossy: tuple[str, ...] = ()  # the flags whose lossy values the study opted in to
    # What the installed engine said: its label ("vllm 0.32.0+cpu", "" when not asked), a
    # one-line note per catalogue flag left out or pinned, and where each default came from.
    engine: str = ""
    notes: tuple[str, ...] = ()
    default_sources: Mapping[str, str] = field(default_factory=dict)
    # The values each tuned flag of vLLM's compile key may take (``compile_grid``); repair
    # moves a proposal onto them. Empty: no grid (a space built by hand).
    grids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(p.name for p in self.params) +
                           tuple(k for k in self.fixed if k not in {p.name for p in self.params}))

    def distributions(self) -> dict[str, BaseDistribution]:
        return {p.name: to_distribution(p) for p in self.params}

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def complete(self, sampled: Mapping[str, Any]) -> dict[str, Any]:
        """All flags of a configuration: the sampled ones plus the fixed ones."""
        flags = {k: v for k, v in self.fixed.items()}
        flags.update({p.name: sampled[p.name] for p in self.params})
        return flags

    def contains(self, flags: Mapping[str, Any]) -> bool:
        """Every tuned value inside its range, every fixed value as fixed, no lossy value
        the study did not opt in to."""
        return (all(p.contains(flags[p.name]) for p in self.params)
                and all(flags.get(k) == v for k, v in self.fixed.items())
                and not self.refused(flags))

    def refused(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        """The lossy values in ``flags`` that the study did not opt in to."""
        return {k: v for k, v in lossy_flags(flags).items() if k not in self.lossy}

    def describe(self) -> dict[str, Any]:
        """JSON-safe summary, stored on the study and compared on re-creation."""
        return {
            "rules": self.rules.name,
            "params": {name: repr(d) for name, d in self.distributions().items()},
            "fixed": dict(self.fixed),
            **({"lossy": list(self.lossy)} if self.lossy else {}),
        }


def to_distribution(p: Param) -> BaseDistribution:
    if p.kind == "int":
        return IntDistribution(int(p.low), int(p.high), log=p.log)
    if p.kind == "float":
        return FloatDistribution(p.low, p.high, log=p.log, step=None if p.log else p.step)
    if p.kind == "bool":
        return CategoricalDistribution((False, True))
    return CategoricalDistribution(p.choices)


def _narrow(p: Param, override: Any) -> Param:
    check_override(p, override)
    changes: dict[str, Any] = {}
    if override.choices is not None:
        changes["choices"] = tuple(override.choices)
    for key in ("low", "high", "log"):
        value = getattr(override, key)
        if value is not None:
            changes[key] = value
    return replace(p, **changes)


def _round_range(p: Param) -> Param:
    if p.kind == "int":
        return replace(p, low=int(math.ceil(p.low)), high=int(math.floor(p.high)))
    return p


def _opt_in_hint(name: str, value: Any) -> str:
    exact = numerics(name).exact
    return (f"{value!r} changes the model's outputs (lossy); opt in with [space] "
            f"lossy = [\"{name}\"], or use {' / '.join(map(repr, exact))}")


def _lossless(p: Param, opted_in: tuple[str, ...], ranged: bool) -> Param:
    """``p`` without its lossy values unless the study opted in; a range that names one
    without the opt-in is an error (ValueError naming the key and the fix)."""
    entry = numerics(p.name)
    if p.name in opted_in or entry.cls == "lossless" or p.kind != "choice":
        return p
    lossy = [c for c in p.choices if entry.lossy(c)]
    if lossy and ranged:
        raise ValueError(f"space.ranges.{p.name}: {_opt_in_hint(p.name, lossy[0])}")
    return replace(p, choices=tuple(c for c in p.choices if not entry.lossy(c)))


def _check_opt_in(sp: Any) -> tuple[str, ...]:
    for name in sp.lossy:
        param(name)  # KeyError names the known parameters
        if name not in lossy_names():
            raise ValueError(f"space.lossy: {name!r} is lossless ({numerics(name).reason}); "
                             f"only {', '.join(lossy_names())} can be opted in")
    return tuple(dict.fromkeys(sp.lossy))


def _measures_itl(spec: StudySpec) -> bool:
    """An objective or SLO on per-message ITL: stream_interval must stay 1 (it would make
    that ITL a per-chunk figure). Per-token ITL (``*_itl_per_token_ms``) divides each gap
    among its tokens, so it may be tuned with those."""
    names = [o.metric for o in spec.objectives] + list(spec.slo.limits())
    return any("_itl_" in n and "_itl_per_token" not in n for n in names)


def _engine_checks(spec: StudySpec, installed: Installed | None,
                   defaults: Mapping[str, Any]) -> tuple[set[str], list[str], dict[str, Any]]:
    """(flags left out, one note each, flags pinned) for this engine; ValueError when the
    study fixes a flag the engine lacks."""
    sp = spec.space
    left_out: set[str] = set()
    notes: list[str] = []
    pinned: dict[str, Any] = {}
    for p in CATALOGUE:
        named = p.name in sp.fixed or p.name in sp.ranges
        reason = unusable(p, installed) if installed is not None else None
        if reason and p.name in sp.fixed:
            raise ValueError(f"space.fixed.{p.name}: {reason}; remove it from the study "
                             "or use an engine that has it")
        if reason:
            left_out.add(p.name)
            if named or not p.opt_in:
                notes.append(f"{p.flag} left out: {reason}")
    if "stream_interval" in sp.ranges and _measures_itl(spec):
        raise ValueError("space.ranges.stream_interval: an objective or SLO is an ITL, and "
                         "stream_interval > 1 makes ITL per chunk; tune it with per-token "
                         "ITL (p99_itl_per_token_ms) or TPOT objectives only")
    if ("stream_interval" not in left_out and "stream_interval" not in sp.fixed
            and "stream_interval" not in sp.ranges and defaults["stream_interval"] != 1):
        pinned["stream_interval"] = 1
        notes.append(f"--stream-interval fixed at 1 (the engine's default is "
                     f"{defaults['stream_interval']}): ITL stays per token")
    return left_out, notes, pinned


def build_space(spec: StudySpec, installed: Installed | None = None) -> SearchSpace:
    """The study's effective space; ValueError (naming the parameter) when it is empty.

    With ``installed`` (what the engine's parser said), catalogue flags that engine lacks
    are left out with a note, a fixed one is a ValueError, and its printed defaults replace
    our table's (``default_sources`` says which came from where)."""
    model, hw, sp = spec.model, spec.hardware, spec.space
    ctx = Context(min_model_len=spec.workload.longest_request,
                  model_max_len=int(model.context_len),
                  num_attention_heads=int(model.num_attention_heads or 0))
    table = vllm_defaults(ctx.model_max_len, hw.memory_gib, hw.gpu, model.tensor_parallel_size)
    defaults, sources = engine_defaults(CATALOGUE, table, installed, hw.gpu)
    if "max_model_len" in defaults and sources.get("max_model_len") != "engine":
        sources["max_model_len"] = "model"
    check_names(sp.fixed, sp.ranges, sp.exclude)
    opted_in = _check_opt_in(sp)
    left_out, notes, fixed = _engine_checks(spec, installed, defaults)
    params: list[Param] = []
    for p in CATALOGUE:
        if p.name in left_out or p.name in fixed:
            continue
        if p.name in sp.fixed:
            value = sp.fixed[p.name]
            check_fixed(p, value)
            if p.name not in opted_in and is_lossy(p.name, value):
                raise ValueError(f"space.fixed.{p.name}: {_opt_in_hint(p.name, value)}")
            fixed[p.name] = value
            continue
        if p.opt_in and p.name not in sp.ranges:
            continue
        if p.name in sp.exclude:
            fixed[p.name] = defaults[p.name]
            continue
        if p.name == "tensor_parallel_size" and "tensor_parallel_size" not in sp.ranges:
            fixed[p.name] = model.tensor_parallel_size
            continue
        p = replace(p, high=DEFAULT_HIGH.get(p.name, p.high))
        if p.name == "max_model_len":
            p = replace(p, low=ctx.min_model_len, high=ctx.model_max_len)
        if p.name in sp.ranges:
            p = _narrow(p, sp.ranges[p.name])
        p = _lossless(p, opted_in, p.name in sp.ranges)
        p = _round_range(p)
        if p.kind in ("int", "float") and p.low > p.high:
            raise ValueError(f"space.ranges.{p.name}: empty range {p.low}..{p.high}")
        if p.kind == "choice" and not p.choices:
            raise ValueError(f"space.ranges.{p.name}: no choices left")
        if p.kind in ("int", "float") and p.low == p.high:
            fixed[p.name] = p.low if p.kind == "float" else int(p.low)
            continue
        params.append(p)
    for p in params:
        try:
            to_distribution(p)
        except ValueError as e:  # e.g. a log scale over a range that reaches 0
            raise ValueError(f"space.ranges.{p.name}: {e}") from e
    space = SearchSpace(tuple(params), fixed, defaults, ctx, rule_set(sp.rules),
                        lossy=opted_in, engine=installed.label if installed is not None else "",
                        notes=tuple(notes), default_sources=sources)
    return replace(space, grids=compile_grids(space)) if sp.compile_grid else space
