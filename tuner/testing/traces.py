"""A synthetic trace in the Mooncake JSONL layout, generated here (seeded), not downloaded.

    python -m tuner.testing.traces examples/traces/synthetic-mooncake.jsonl

What it imitates, each part a parameter of ``TraceShape``:

- bursts: bursts start as a Poisson process; each holds 1 + Poisson(``burst_mean`` - 1)
  requests spaced by exponential gaps of mean ``burst_gap_ms``; the overall rate is about
  ``rate`` requests a second;
- shared prefixes: ``groups`` prefix groups, each a prefix of 1 to ``max_prefix_blocks``
  blocks of ``PREFIX_BLOCK_TOKENS``; a request belongs to one with probability
  ``shared_share`` (the groups Zipf-weighted: the first is the most used), and its
  ``hash_ids`` then start with the group's ids;
- lengths: the prompt's own part (after the prefix) and the reply are lognormal with medians
  ``input_median`` and ``output_median`` and log-spreads ``input_sigma``, ``output_sigma``,
  clipped to ``max_input`` (the whole prompt) and ``max_output``.

Every prompt's blocks have hash ids, as Mooncake's: ceil(input_length / 512) ids, the
group's first, then ids no other request uses (new ids are consecutive integers).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner.loadgen.replay import PREFIX_BLOCK_TOKENS


@dataclass(frozen=True)
class TraceShape:
    """The synthetic trace's parameters (see the module docstring)."""

    requests: int = 300
    rate: float = 4.0
    burst_mean: float = 3.0
    burst_gap_ms: float = 40.0
    groups: int = 4
    max_prefix_blocks: int = 4
    shared_share: float = 0.7
    input_median: float = 300.0
    input_sigma: float = 0.8
    output_median: float = 96.0
    output_sigma: float = 0.7
    max_input: int = 4096
    max_output: int = 512
    seed: int = 0


def synthetic_trace(shape: TraceShape = TraceShape()) -> list[dict]:
    """The trace's records as Mooncake JSON objects, in arrival order."""
    rng = np.random.default_rng(shape.seed)
    times = _burst_times(shape, rng)
    next_id = [0]

    def fresh(k: int) -> list[int]:
        next_id[0] += k
        return list(range(next_id[0] - k, next_id[0]))

    prefixes = [fresh(int(rng.integers(1, shape.max_prefix_blocks + 1)))
                for _ in range(shape.groups)]
    weights = 1.0 / np.arange(1, shape.groups + 1)
    out = []
    for t in times:
        shared = (prefixes[int(rng.choice(shape.groups, p=weights / weights.sum()))]
                  if shape.groups and rng.random() < shape.shared_share else [])
        own = _lognormal(rng, shape.input_median, shape.input_sigma)
        n_in = min(shape.max_input, len(shared) * PREFIX_BLOCK_TOKENS + own)
        blocks = math.ceil(n_in / PREFIX_BLOCK_TOKENS)
        ids = shared[:blocks] + fresh(max(0, blocks - len(shared)))
        n_out = min(shape.max_output, _lognormal(rng, shape.output_median, shape.output_sigma))
        out.append({"timestamp": int(round(t * 1000)), "input_length": n_in,
                    "output_length": n_out, "hash_ids": ids})
    return out


def _burst_times(shape: TraceShape, rng: np.random.Generator) -> list[float]:
    times: list[float] = []
    start = 0.0
    while len(times) < shape.requests:
        size = 1 + int(rng.poisson(shape.burst_mean - 1))
        gaps = rng.exponential(shape.burst_gap_ms / 1000.0, size - 1)
        times += [start, *(start + np.cumsum(gaps)).tolist()]
        start = max(times[-1], start + rng.exponential(shape.burst_mean / shape.rate))
    return sorted(times[:shape.requests])


def _lognormal(rng: np.random.Generator, median: float, sigma: float) -> int:
    return max(1, int(round(rng.lognormal(math.log(median), sigma))))


def write_trace(path: Path, shape: TraceShape = TraceShape()) -> None:
    """Write the synthetic trace as JSONL (one object a line)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in synthetic_trace(shape)))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--requests", type=int, default=TraceShape.requests)
    p.add_argument("--seed", type=int, default=TraceShape.seed)
    args = p.parse_args(argv)
    write_trace(args.out, TraceShape(requests=args.requests, seed=args.seed))


if __name__ == "__main__":
    main()
