"""Seeded workloads: the same ``WorkloadSpec`` always yields the same requests.

Prompts are token ids, so that input lengths are exact without a local tokenizer (the
completions endpoint and vLLM's ``/generate`` take ids); the chat endpoint gets the ids
spelled as words (see ``endpoints.ids_to_text``), which makes its input length approximate.
Every generator is infinite; take as many requests as the run needs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tuner.loadgen.replay import prompt_ids
from tuner.loadgen.sharegpt import load_sharegpt
from tuner.loadgen.spec import WorkloadSpec
from tuner.loadgen.trace import read_trace

Content = tuple[int, ...] | str


@dataclass(frozen=True)
class Request:
    """One request's input: chat-style segments ``(role, token ids or text)``.

    ``prompt_len`` is exact for token ids and an estimate for text (the server's usage report
    replaces it when it comes back). ``output_len`` is what ``max_tokens`` asks for.
    """

    segments: tuple[tuple[str, Content], ...]
    prompt_len: int
    output_len: int


def length_bounds(length: int, range_ratio: float) -> tuple[int, int]:
    """vLLM's random-dataset bounds: ``[floor(L*(1-r)), ceil(L*(1+r))]``, at least 1."""
    low = max(1, math.floor(length * (1 - range_ratio)))
    return low, max(low, math.ceil(length * (1 + range_ratio)))


def iter_requests(spec: WorkloadSpec) -> Iterator[Request]:
    """An endless, reproducible stream of requests for ``spec``."""
    rng = np.random.default_rng(spec.seed)
    if spec.kind == "random":
        return _random(spec, rng)
    if spec.kind == "shared-prefix":
        return _shared_prefix(spec, rng)
    if spec.kind == "multi-turn":
        return _multi_turn(spec, rng)
    if spec.kind == "trace":
        return _trace(spec, rng)
    return _sharegpt(spec, rng)


def take(spec: WorkloadSpec, n: int) -> list[Request]:
    return list(itertools.islice(iter_requests(spec), n))


class _Sampler:
    def __init__(self, spec: WorkloadSpec, rng: np.random.Generator) -> None:
        self.spec, self.rng = spec, rng
        self.in_bounds = length_bounds(spec.input_len, spec.range_ratio)
        self.out_bounds = length_bounds(max(spec.output_len, 1), spec.range_ratio)

    def ids(self, n: int) -> tuple[int, ...]:
        return tuple(self.rng.integers(self.spec.min_token_id, self.spec.vocab_size, n).tolist())

    def input_len(self) -> int:
        return int(self.rng.integers(self.in_bounds[0], self.in_bounds[1] + 1))

    def output_len(self) -> int:
        return int(self.rng.integers(self.out_bounds[0], self.out_bounds[1] + 1))


def _random(spec: WorkloadSpec, rng: np.random.Generator) -> Iterator[Request]:
    s = _Sampler(spec, rng)
    while True:
        n_in, n_out = s.input_len(), s.output_len()
        yield Request((("user", s.ids(n_in)),), n_in, n_out)


def _shared_prefix(spec: WorkloadSpec, rng: np.random.Generator) -> Iterator[Request]:
    s = _Sampler(spec, rng)
    prefixes = [s.ids(spec.prefix_len) for _ in range(spec.num_prefixes)]
    while True:
        prefix = prefixes[int(rng.integers(0, spec.num_prefixes))]
        n_in, n_out = s.input_len(), s.output_len()
        yield Request((("user", prefix + s.ids(n_in)),), spec.prefix_len + n_in, n_out)


def _multi_turn(spec: WorkloadSpec, rng: np.random.Generator) -> Iterator[Request]:
    """Batches of ``conversations`` conversations, sent turn by turn: every conversation's
    turn 1, then every turn 2, ... so that a turn usually starts after its previous turn ended.
    The assistant's replies in the history are synthetic, of the length the turn asked for."""
    s = _Sampler(spec, rng)
    while True:
        plans = [
            [(s.ids(s.input_len()), s.ids(s.output_len())) for _ in range(spec.turns)]
            for _ in range(spec.conversations)
        ]
        for turn in range(spec.turns):
            for plan in plans:
                history: list[tuple[str, Content]] = []
                for user, reply in plan[:turn]:
                    history += [("user", user), ("assistant", reply)]
                user, reply = plan[turn]
                segments = tuple(history) + (("user", user),)
                yield Request(segments, sum(len(c) for _, c in segments), len(reply))


def _sharegpt(spec: WorkloadSpec, rng: np.random.Generator) -> Iterator[Request]:
    pairs = load_sharegpt(spec.dataset or "")
    while True:  # each pass over the file in a fresh seeded order
        for i in rng.permutation(len(pairs)):
            prompt, reply_len = pairs[int(i)]
            n_out = spec.output_len if spec.output_len > 0 else reply_len
            yield Request((("user", prompt),), estimate_tokens(prompt), n_out)


def _trace(spec: WorkloadSpec, rng: np.random.Generator) -> Iterator[Request]:
    """The trace's requests in its order, again and again (``replay``)."""
    records, s = read_trace(spec.trace or "", spec.trace_sha256), _Sampler(spec, rng)
    blocks: dict[int, tuple[int, ...]] = {}
    while True:
        for r in records:
            ids = prompt_ids(r, blocks, s.ids)
            yield Request((("user", ids),), r.input_tokens, r.output_tokens)


def estimate_tokens(text: str) -> int:
    """About four characters a token: used only where no tokenizer or usage report exists."""
    return max(1, round(len(text) / 4))
