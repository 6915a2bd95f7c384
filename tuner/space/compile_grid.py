"""The compile grid: the values that the flags in vLLM's compile key may take (pure).

vLLM compiles the model (torch.compile, then CUDA-graph capture) once per compile key and
keeps the artefact under ``VLLM_CACHE_ROOT`` (``$TUNER_HOME/cache``: ``tuner.engine.command``).
The key hashes the token budget and the CUDA-graph capture sizes that ``max_num_seqs``
sets, among others (``COMPILE_KEY``; sources in docs/starts.md). A budget drawn from a
continuous range never repeats, so every compiled start misses; on a grid, budgets repeat
and later starts load the artefact. Repair (``tuner.space.repair``) moves each tuned
``GRIDDED`` flag onto its grid, so the proposal, the stored parameters and the launch agree.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from tuner.space.defaults import cudagraph_capture_size

if TYPE_CHECKING:  # space.py builds the grids with this module
    from tuner.space.space import SearchSpace

# The tuned integer flags of the compile key, snapped to a grid in this order (the model
# length before the budget that must hold it): the model length through the model's
# config, the budget itself and through the compile range and the capture sizes, the
# sequences through the capture sizes (below 256).
GRIDDED = ("max_model_len", "max_num_batched_tokens", "max_num_seqs")

# Two values per doubling, 2^k and 1.5 x 2^k (within 7 % of a geometric half-doubling
# step): each doubling of the budget, the scale vLLM's own defaults change on, keeps a
# midpoint, while a 20-trial study's moves land on values already started.
MANTISSAS = (1.0, 1.5)

# Fixed flags whose value a gridded flag must reach under a rule: kept on its grid.
BOUNDS = {"max_num_batched_tokens": ("max_model_len", "max_num_seqs"),
          "max_model_len": ("max_num_batched_tokens",)}

GRID_RULE = "on-compile-grid"  # how repair names a move onto the grid

# The flags of vLLM 0.24's compile key that the catalogue tunes (VllmConfig.compute_hash:
# scheduler, model, cache, parallel and compilation configs), the sequences as the largest
# capture size they give; enforce_eager compiles nothing.
COMPILE_KEY = ("max_num_batched_tokens", "capture_size", "max_model_len", "block_size",
               "kv_cache_dtype", "tensor_parallel_size", "optimization_level",
               "performance_mode")


def grid_values(low: int, high: int, anchors: Iterable[int] = ()) -> tuple[int, ...]:
    """The grid over ``low..high``: MANTISSAS x powers of two inside, both ends, and every
    ``anchor`` inside the range (baselines, fixed values), ascending."""
    values = {int(low), int(high)}
    values.update(int(a) for a in anchors if low <= a <= high)
    k = 0
    while (1 << k) <= high:
        values.update(int(m * (1 << k)) for m in MANTISSAS
                      if low <= m * (1 << k) <= high and (m * (1 << k)).is_integer())
        k += 1
    return tuple(sorted(values))


def neighbours(grid: tuple[int, ...], value: float) -> tuple[int, ...]:
    """The grid values around ``value``, the nearer (on a log scale) first; ``(value,)``
    when it is on the grid, ``()`` when it lies outside the grid's span."""
    if value in grid:
        return (int(value),)
    if not grid or value < grid[0] or value > grid[-1]:
        return ()
    above = next(g for g in grid if g > value)
    below = max(g for g in grid if g < value)
    if math.log(value / below) <= math.log(above / value):
        return below, above
    return above, below


def capture_size(flags: Mapping[str, Any]) -> int | None:
    """The largest CUDA-graph capture size of ``flags`` (vLLM 0.24's
    ``VllmConfig._set_cudagraph_sizes``): the given one or min(2 x seqs, 512), at most the
    budget. Above 256 sequences every count captures the same sizes."""
    seqs, budget = flags.get("max_num_seqs"), flags.get("max_num_batched_tokens")
    given = flags.get("max_cudagraph_capture_size")
    if given is None and seqs is None:
        return None
    size = int(given) if given is not None else cudagraph_capture_size(seqs)
    return min(size, int(budget)) if budget is not None else size


def compile_key(flags: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What of the effective ``flags`` enters vLLM's compile key, in ``COMPILE_KEY``
    order (None: eager, nothing is compiled)."""
    if flags.get("enforce_eager"):
        return None
    return tuple(capture_size(flags) if name == "capture_size" else flags.get(name)
                 for name in COMPILE_KEY)


def compile_grids(space: SearchSpace) -> dict[str, tuple[int, ...]]:
    """The grid of each tuned ``GRIDDED`` flag of ``space``: over its range, with the
    values its baselines launch and the study's fixed values that bound it (the fixed
    max_model_len for the budget, that a budget without chunked prefill must reach)."""
    from tuner.space.baselines import baselines  # it reads a built space: built after it
    runs = [b.flags for b in baselines(space)]
    grids = {}
    for name in GRIDDED:
        p = space.param(name)
        if p is None or p.kind != "int":
            continue
        anchors = [f[name] for f in runs if isinstance(f.get(name), int)]
        anchors += [v for k, v in space.fixed.items() if k in BOUNDS.get(name, ())]
        grids[name] = grid_values(int(p.low), int(p.high), anchors)
    return grids


def on_grid(space: SearchSpace, flags: Mapping[str, Any]) -> tuple[str, int] | None:
    """The first gridded flag of ``flags`` off its grid, with the grid value to move it
    to: the nearer neighbour, or the other where only that one keeps the rules (a budget
    snaps up to hold max_model_len); None when every one is on its grid or outside its
    span (the range check reports that)."""
    for name, grid in space.grids.items():
        options = neighbours(grid, flags[name])
        if len(options) != 2:
            continue
        for value in options:
            if not space.rules.violations({**flags, name: value}, space.context):
                return name, value
        return name, options[0]
    return None


def snap(space: SearchSpace, flags: Mapping[str, Any]) -> dict[str, Any]:
    """``flags`` with every gridded flag on its grid: flag by flag as ``on_grid`` moves
    them when ``flags`` is a whole configuration, else each to its nearer neighbour."""
    out = dict(flags)
    if all(name in out for name in space.names):
        while (move := on_grid(space, out)) is not None:
            out[move[0]] = move[1]
        return out
    for name, grid in space.grids.items():
        if name in out and (options := neighbours(grid, out[name])):
            out[name] = options[0]
    return out
