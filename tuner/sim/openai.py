"""OpenAI-compatible request parsing and response bytes, as vLLM's server writes them (pure)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from tuner.sim import greedy
from tuner.sim.kvcache import block_hashes

TOKEN_TEXT = " tok"


class BadRequest(ValueError):
    """A request vLLM would answer with HTTP 400."""


@dataclass(frozen=True)
class ParsedRequest:
    kind: str  # completions | chat | generate
    model: str | None
    token_ids: list[int]
    max_tokens: int
    stream: bool
    include_usage: bool
    logprobs: int | None = None  # completions: the logprobs asked for (non-streamed replies)
    prompt_text: str = ""        # the prompt as sent: the greedy answer's stable key


def text_token_ids(text: str) -> list[int]:
    """Approximate tokenisation: one token per whitespace-separated word (stable ids)."""
    return [hash(w) & 0x7FFFFFFF for w in text.split()]


def _chat_text(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    parts = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        parts.append(f"{m.get('role', 'user') if isinstance(m, dict) else 'user'}: {content or ''}")
    return "\n".join(parts)


def parse(kind: str, body: Any) -> ParsedRequest:
    """Validate a request body; BadRequest with vLLM's kind of message if it is wrong."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    if kind == "chat":
        ids = text_token_ids(_chat_text(body.get("messages")))
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            ids = text_token_ids(prompt)
        elif isinstance(prompt, list) and all(map(int.__instancecheck__, prompt)):
            ids = prompt
        else:
            raise BadRequest("prompt must be a string or a list of token ids")
    if kind == "generate" and "prompt_token_ids" in body:
        ids = list(body["prompt_token_ids"])
    if not ids:
        raise BadRequest("The prompt cannot be empty.")
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    max_tokens = 16 if max_tokens is None else max_tokens
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest(f"max_tokens must be at least 1, got {max_tokens}.")
    options = body.get("stream_options") or {}
    logprobs = body.get("logprobs") if kind == "completions" else None
    return ParsedRequest(kind, body.get("model"), ids, max_tokens, bool(body.get("stream", False)),
                         bool(options.get("include_usage", False)),
                         logprobs if isinstance(logprobs, int) and logprobs >= 0 else None,
                         json.dumps(body.get("prompt"), sort_keys=True))


def check_length(req: ParsedRequest, max_model_len: int) -> None:
    n = len(req.token_ids)
    if n + req.max_tokens > max_model_len:
        raise BadRequest(
            f"'max_tokens' or 'max_completion_tokens' is too large: {req.max_tokens}. This "
            f"model's maximum context length is {max_model_len} tokens and your request has "
            f"{n} input tokens ({req.max_tokens} > {max_model_len} - {n}).")


def hashes_for(req: ParsedRequest, block_size: int, caching: bool) -> list[int]:
    return block_hashes(req.token_ids, block_size) if caching else []


def error_body(message: str, code: int, type_: str = "BadRequestError") -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "param": None,
                                 "code": code}}).encode()


class StreamFormat:
    """The byte strings of one streamed reply, prepared once per request."""

    def __init__(self, req: ParsedRequest, model: str) -> None:
        self.req = req
        created = int(time.time())
        rid = uuid.uuid4().hex
        if req.kind == "chat":
            head = (f'{{"id":"chatcmpl-{rid}","object":"chat.completion.chunk","created":{created},'
                    f'"model":"{model}","choices":[{{"index":0,"delta":')
            self.first = (f'data: {head}{{"role":"assistant","content":""}},"logprobs":null,'
                          f'"finish_reason":null}}]}}\n\n').encode()
            self.token = f'data: {head}{{"content":"{TOKEN_TEXT}"}},"logprobs":null,"finish_reason":null}}]}}\n\n'.encode()
            self.last = f'data: {head}{{"content":"{TOKEN_TEXT}"}},"logprobs":null,"finish_reason":"length","stop_reason":null}}]}}\n\n'.encode()
            self.usage_head = f'data: {{"id":"chatcmpl-{rid}","object":"chat.completion.chunk","created":{created},"model":"{model}","choices":[],'
        elif req.kind == "completions":
            head = (f'{{"id":"cmpl-{rid}","object":"text_completion","created":{created},'
                    f'"model":"{model}","choices":[{{"index":0,"text":"{TOKEN_TEXT}","logprobs":null,')
            self.first = b""
            self.token = f'data: {head}"finish_reason":null,"stop_reason":null}}]}}\n\n'.encode()
            self.last = f'data: {head}"finish_reason":"length","stop_reason":null}}]}}\n\n'.encode()
            self.usage_head = f'data: {{"id":"cmpl-{rid}","object":"text_completion","created":{created},"model":"{model}","choices":[],'
        else:
            self.first = b""
            self.token = self.last = b""
            self.usage_head = ""

    def chunk(self, index: int, finished: bool) -> bytes:
        if self.req.kind == "generate":
            return json.dumps({"text": [TOKEN_TEXT * index]}).encode() + b"\0"
        return self.last if finished else self.token

    def tail(self, completion_tokens: int) -> bytes:
        if self.req.kind == "generate":
            return b""
        out = b""
        if self.req.include_usage:
            n = len(self.req.token_ids)
            out += (self.usage_head + f'"usage":{{"prompt_tokens":{n},"total_tokens":'
                    f'{n + completion_tokens},"completion_tokens":{completion_tokens}}}}}\n\n').encode()
        return out + b"data: [DONE]\n\n"


def _logprobs(req: ParsedRequest, n: int, kv_cache_dtype: str) -> tuple[str, dict[str, Any]]:
    """The greedy answer's text and vLLM's completions ``logprobs`` object (a model:
    ``tuner.sim.greedy``)."""
    tokens, values = greedy.answer(req.prompt_text, n, kv_cache_dtype)
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return "".join(tokens), {"tokens": tokens, "token_logprobs": values,
                             "top_logprobs": [{t: v} for t, v in zip(tokens, values)],
                             "text_offset": offsets}


def full_response(req: ParsedRequest, model: str, completion_tokens: int,
                  kv_cache_dtype: str = "auto") -> dict[str, Any]:
    """The non-streamed reply (with logprobs when a completions request asked for them)."""
    n = len(req.token_ids)
    usage = {"prompt_tokens": n, "total_tokens": n + completion_tokens,
             "completion_tokens": completion_tokens}
    text = TOKEN_TEXT * completion_tokens
    if req.kind == "generate":
        return {"text": [text]}
    if req.kind == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": text},
                  "logprobs": None, "finish_reason": "length"}
        obj, prefix = "chat.completion", "chatcmpl-"
    else:
        logprobs = None
        if req.logprobs is not None:
            text, logprobs = _logprobs(req, completion_tokens, kv_cache_dtype)
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length",
                  "stop_reason": None}
        obj, prefix = "text_completion", "cmpl-"
    return {"id": prefix + uuid.uuid4().hex, "object": obj, "created": int(time.time()),
            "model": model, "choices": [choice], "usage": usage}
