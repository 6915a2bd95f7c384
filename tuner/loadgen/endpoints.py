"""Request bodies for the three endpoints, and which stream parser reads each reply.

* ``completions``: OpenAI ``/v1/completions``, prompt as token ids (exact input length).
* ``chat``: OpenAI ``/v1/chat/completions``, token ids spelled as words.
* ``generate``: vLLM's plain ``api_server`` ``/generate`` (the article's entry point), token
  ids spelled as words: that server asserts its output has a prompt text, which a token-id
  prompt lacks, so its input length is approximate too. (vLLM dropped this server after
  0.2x; the CPU build 0.32 has none.)

Output length is exact through ``max_tokens`` plus ``ignore_eos``. The OpenAI endpoints ask for
``stream_options.include_usage`` so the server reports the tokens it produced.
"""

from __future__ import annotations

import functools
import itertools
import json

from tuner.loadgen.streams import GenerateParser, SSEParser
from tuner.loadgen.workloads import Request

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}
PARSERS = {"completions": SSEParser, "chat": SSEParser, "generate": GenerateParser}

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
# Short lowercase letter strings, in the order the word-level tokenizers of tuner.modelfolder
# list them from id 95 (after <unk> and the 94 printable ASCII characters): there id i spells
# exactly token i, so text prompts keep their exact length. With real tokenizers a word is
# usually one or two tokens. Distinct ids give distinct words, so prompts stay distinct.
# Built on first use: most runs send token ids and never spell a word.
_FIRST_WORD_ID = 95


@functools.cache
def _words() -> list[str]:
    return ["".join(p) for n in (2, 3, 4) for p in itertools.product(_LETTERS, repeat=n)]


def ids_to_text(ids: tuple[int, ...]) -> str:
    """Token ids as a deterministic string of short words (one word per id)."""
    words, first = _words(), _FIRST_WORD_ID
    n = len(words)
    return " ".join([words[(i - first) % n] for i in ids])


def _prompt(request: Request) -> list[int] | str:
    contents = [c for _, c in request.segments]
    if all(isinstance(c, tuple) for c in contents):
        return [i for c in contents for i in c]
    return "\n".join(c if isinstance(c, str) else ids_to_text(c) for c in contents)


def _text(content: tuple[int, ...] | str) -> str:
    return content if isinstance(content, str) else ids_to_text(content)


def build_body(request: Request, endpoint: str, model: str, ignore_eos: bool = True,
               text_prompts: bool = False) -> bytes:
    """The JSON body of ``request`` for ``endpoint``, encoded once before the run.
    ``text_prompts`` spells completions prompts as words too (servers that take no ids)."""
    stream_options = {"include_usage": True}
    if endpoint == "completions":
        prompt = _prompt(request)
        if text_prompts and isinstance(prompt, list):
            prompt = ids_to_text(tuple(prompt))
        body = {"model": model, "prompt": prompt, "max_tokens": request.output_len,
                "stream": True, "stream_options": stream_options}
    elif endpoint == "chat":
        messages = [{"role": role, "content": _text(c)} for role, c in request.segments]
        body = {"model": model, "messages": messages,
                "max_completion_tokens": request.output_len,
                "stream": True, "stream_options": stream_options}
    elif endpoint == "generate":
        prompt = _prompt(request)
        body = {"prompt": ids_to_text(tuple(prompt)) if isinstance(prompt, list) else prompt,
                "max_tokens": request.output_len, "stream": True}
    else:
        raise ValueError(f"unknown endpoint {endpoint!r}")
    if ignore_eos:
        body["ignore_eos"] = True
    return json.dumps(body, separators=(",", ":")).encode()
