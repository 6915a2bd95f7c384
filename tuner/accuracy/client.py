"""Greedy completions with logprobs from an OpenAI-compatible server (the guard's I/O).

One non-streamed ``/v1/completions`` request per prompt, all in flight together (a few
threads): temperature 0, ``logprobs = 1`` (the chosen token's logprob), ``ignore_eos`` so that
every completion runs to ``max_tokens`` (vLLM's extension; the simulator ignores it), token
ids as the tokens (``return_tokens_as_token_ids``) so that two servers compare ids, not text.
A request that fails raises ``AccuracyError`` naming the prompt and why.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from tuner.accuracy.figures import Completion
from tuner.errors import AccuracyError


def request_body(model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    return {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "logprobs": 1, "ignore_eos": True, "return_tokens_as_token_ids": True,
            "stream": False, "seed": 0}


def parse_completion(reply: Any) -> Completion:
    """The tokens and chosen-token logprobs of a completions reply."""
    try:
        logprobs = reply["choices"][0]["logprobs"]
        tokens, values = logprobs["tokens"], logprobs["token_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise AccuracyError("the reply has no logprobs (choices[0].logprobs.tokens / "
                            "token_logprobs)") from None
    return Completion(tuple(str(t) for t in tokens),
                      tuple(None if v is None else float(v) for v in values))


def complete(url: str, model: str, prompt: str, max_tokens: int,
             timeout: float = 120.0) -> Completion:
    data = json.dumps(request_body(model, prompt, max_tokens)).encode()
    req = urllib.request.Request(url.rstrip("/") + "/v1/completions", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return parse_completion(json.loads(resp.read()))
    except urllib.error.HTTPError as e:
        body = e.read()[:200].decode("utf-8", "replace")
        raise AccuracyError(f"prompt {prompt[:30]!r}: HTTP {e.code}: {body}") from e
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise AccuracyError(f"prompt {prompt[:30]!r}: {e}") from e


def complete_all(url: str, model: str, prompts: Sequence[str], max_tokens: int,
                 timeout: float = 120.0, threads: int = 8) -> list[Completion]:
    """Completions of ``prompts``, in their order."""
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(prompts)))) as pool:
        return list(pool.map(lambda p: complete(url, model, p, max_tokens, timeout), prompts))
