"""The accuracy guard's two figures, from greedy completions of the same prompts (pure).

A reference completion (the default configuration's) and a replayed one (a trial's with a
lossy flag value) agree up to their first divergence: the first position where the tokens
differ, or where one ends and the other goes on.

- **token agreement** of one prompt: the share of positions before the first divergence,
  ``agreed / max(len(ref), len(got))`` (1 when both are empty); of a prompt set: the mean
  over its prompts. Greedy decoding makes every token after a divergence condition on a
  different prefix, so only the agreed prefix is compared token by token.
- **logprob difference**: the mean absolute difference of the chosen (top-1, greedy) token's
  logprob over every agreed position of every prompt (positions pooled; None when no
  position agreed, or a logprob is missing there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Completion:
    """One greedy completion: its tokens and each token's logprob (None where missing)."""

    tokens: tuple[str, ...]
    logprobs: tuple[float | None, ...] = ()


def agreed_prefix(ref: Completion, got: Completion) -> int:
    """How many leading tokens the two completions share."""
    n = 0
    for a, b in zip(ref.tokens, got.tokens):
        if a != b:
            break
        n += 1
    return n


def agreement(ref: Completion, got: Completion) -> float:
    """The share of positions before the first divergence (1.0 for two empty ones)."""
    longest = max(len(ref.tokens), len(got.tokens))
    return 1.0 if longest == 0 else agreed_prefix(ref, got) / longest


@dataclass(frozen=True)
class Figures:
    """The guard's figures over a prompt set."""

    token_agreement: float          # mean over prompts
    logprob_diff: float | None      # mean |delta logprob| over the agreed positions
    prompts: int
    diverged: int                   # prompts whose completions differ somewhere
    agreed_tokens: int              # positions before the first divergence, all prompts
    tokens: int                     # positions compared: the longer completion, all prompts


def compare(refs: Sequence[Completion], gots: Sequence[Completion]) -> Figures:
    """Both figures for completions of the same prompts, in the same order."""
    if len(refs) != len(gots) or not refs:
        raise ValueError(f"need the same non-zero number of completions, got {len(refs)} "
                         f"references and {len(gots)} replays")
    shares, diffs, agreed, total, diverged = [], [], 0, 0, 0
    for ref, got in zip(refs, gots):
        k = agreed_prefix(ref, got)
        longest = max(len(ref.tokens), len(got.tokens))
        shares.append(agreement(ref, got))
        diverged += k < longest
        agreed, total = agreed + k, total + longest
        for a, b in zip(ref.logprobs[:k], got.logprobs[:k]):
            if a is not None and b is not None:
                diffs.append(abs(a - b))
    return Figures(token_agreement=sum(shares) / len(shares),
                   logprob_diff=sum(diffs) / len(diffs) if diffs else None,
                   prompts=len(refs), diverged=diverged, agreed_tokens=agreed, tokens=total)
