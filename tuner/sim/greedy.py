"""The simulated engine's greedy answers: deterministic tokens and logprobs (pure; a model).

The simulator has no weights, so its completions are a model of what the accuracy guard
looks at, not text: each prompt gets a fixed token sequence and fixed logprobs from a stable
hash of the prompt (the same on every run, process and host). With a lossy KV-cache dtype
(anything but ``auto``) the model diverges as a quantised cache might: one prompt in
``DIVERGE_EVERY`` (chosen by its hash) takes another token at a position in the second half
of its answer and goes on differently from there, and every logprob before that moves by
``LOGPROB_SHIFT``. Over the guard's 32 prompts x 64 tokens that gives a token agreement near
0.93 and a logprob difference of 0.02: figures that exercise the guard, never evidence
about fp8 on a real model.
"""

from __future__ import annotations

import hashlib

DIVERGE_EVERY = 4
LOGPROB_SHIFT = 0.02
VOCAB = 32000


def _h(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8],
                          "big")


def divergence(prompt: str, n: int, kv_cache_dtype: str) -> int | None:
    """The position where a lossy configuration's answer leaves the exact one (or None)."""
    if kv_cache_dtype == "auto" or n < 2 or _h(prompt, "diverges") % DIVERGE_EVERY:
        return None
    return n // 2 + _h(prompt, "at") % (n - n // 2)


def answer(prompt: str, n: int, kv_cache_dtype: str = "auto") -> tuple[list[str], list[float]]:
    """``n`` greedy tokens (``token_id:<id>``, as vLLM spells ids) and their logprobs."""
    cut = divergence(prompt, n, kv_cache_dtype)
    lossy = kv_cache_dtype != "auto"
    tokens, logprobs = [], []
    for i in range(n):
        branch = "exact" if cut is None or i < cut else "diverged"
        tokens.append(f"token_id:{_h(prompt, branch, i) % VOCAB}")
        lp = -((_h(prompt, "lp", i) % 2000) / 1000.0)  # in (-2, 0]
        logprobs.append(round(lp - LOGPROB_SHIFT if lossy else lp, 6))
    return tokens, logprobs
