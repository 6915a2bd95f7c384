"""Read a ShareGPT-format JSON file: ``[{"conversations": [{"from": "human", "value": ...},
{"from": "gpt", "value": ...}, ...]}, ...]``.

As vLLM's ShareGPT dataset: the first human turn is the prompt and the reply that follows it
sets the output length; conversations with fewer than two turns are skipped, and so are pairs
whose prompt or reply is under 4 tokens or whose prompt is over 1024 or total over 2048
tokens (lengths estimated at four characters a token, since no tokenizer is loaded).
"""

from __future__ import annotations

import json
from tuner.errors import UsageError


def load_sharegpt(path: str) -> tuple[tuple[str, int], ...]:
    """``(prompt text, estimated reply tokens)`` pairs of the file; raises UsageError."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read ShareGPT dataset {path!r}: {e}") from e
    if not isinstance(data, list):
        raise UsageError(f"{path}: a ShareGPT file is a JSON list of conversations")
    pairs = tuple(p for entry in data if (p := _pair(entry)) is not None)
    if not pairs:
        raise UsageError(f"{path}: no usable human/gpt pair (each needs >= 2 turns)")
    return pairs


def _pair(entry: object) -> tuple[str, int] | None:
    turns = entry.get("conversations") if isinstance(entry, dict) else None
    if not isinstance(turns, list) or len(turns) < 2:
        return None
    prompt, reply = turns[0].get("value"), turns[1].get("value")
    if not isinstance(prompt, str) or not isinstance(reply, str):
        return None
    n_in, n_out = max(1, round(len(prompt) / 4)), max(1, round(len(reply) / 4))
    if n_in < 4 or n_out < 4 or n_in > 1024 or n_in + n_out > 2048:
        return None
    return prompt, n_out
