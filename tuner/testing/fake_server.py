"""A scripted fake of a streaming vLLM server, for tests and benchmarks on loopback.

It serves ``/v1/completions``, ``/v1/chat/completions`` (OpenAI server-sent events with
``stream_options.include_usage``), vLLM's plain ``/generate`` stream, ``/v1/models``,
``/metrics`` (the Prometheus names vLLM exports) and ``/health``. Every request gets its first
token ``ttft_ms`` after it arrives and then one token every ``itl_ms`` (a list is cycled), on
absolute deadlines so timer error does not accumulate; it streams exactly ``max_tokens``
tokens. With ``stream_interval`` k > 1 a message carries k tokens (the first token alone, the
last message what is left), as vLLM's ``--stream-interval``; 0 sends the whole reply in one
message. Every ``fail_every``-th request answers HTTP 500, every ``abort_every``-th has its
connection cut halfway, every ``error_every``-th sends an error message halfway (as vLLM does
when the engine fails mid-stream). Every ``preempt_every``-th request counts a preemption.
``/metrics`` also reports how late the server itself wrote tokens (``fake:token_lateness_*``):
a busy machine makes the fake miss its script, and tests can tell.

Run it as a process (what tests do: real HTTP, real sockets)::

    with FakeServer(FakeScript(ttft_ms=20, itl_ms=(5,))) as server:
        server.url  # http://127.0.0.1:PORT

or ``python -m tuner.testing.fake_server --port 8000 --ttft-ms 20 --itl-ms 5``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass

from aiohttp import web

from tuner.testing.popen import stopped

BLOCK = 16  # tokens per prefix-cache block


@dataclass(frozen=True)
class FakeScript:
    ttft_ms: float = 20.0
    itl_ms: tuple[float, ...] = (5.0,)
    fail_every: int = 0
    abort_every: int = 0
    error_every: int = 0
    preempt_every: int = 0
    metrics: bool = True
    model: str = "fake-model"
    kv_capacity_tokens: int = 1_000_000
    generate_sep: str = "\0"
    stream_interval: int = 1

    def to_argv(self) -> list[str]:
        argv = ["--ttft-ms", str(self.ttft_ms), "--itl-ms", ",".join(map(str, self.itl_ms)),
                "--fail-every", str(self.fail_every), "--abort-every", str(self.abort_every),
                "--error-every", str(self.error_every), "--preempt-every",
                str(self.preempt_every), "--model", self.model,
                "--kv-capacity-tokens", str(self.kv_capacity_tokens),
                "--generate-sep", "nul" if self.generate_sep == "\0" else "newline",
                "--stream-interval", str(self.stream_interval)]
        return argv + ([] if self.metrics else ["--no-metrics"])


class _State:
    def __init__(self, script: FakeScript) -> None:
        self.script = script
        self.requests = 0
        self.preemptions = 0
        self.queries = 0
        self.hits = 0
        self.running = 0
        self.kv_tokens = 0
        self.seen_blocks: set[int] = set()
        self.lateness: collections.deque[float] = collections.deque(maxlen=100_000)

    def admit(self, prompt: object) -> tuple[int, int]:
        """Count the request; returns its 1-based index and prompt length."""
        self.requests += 1
        tokens = prompt if isinstance(prompt, list) else str(prompt).split()
        self.queries += len(tokens)
        parent, hit = 0, True
        for start in range(0, len(tokens) - len(tokens) % BLOCK, BLOCK):
            parent = hash((parent, tuple(tokens[start:start + BLOCK])))
            hit = hit and parent in self.seen_blocks
            if hit:  # a cached prefix: only full blocks in an unbroken chain from the start
                self.hits += BLOCK
            else:
                self.seen_blocks.add(parent)
        every = self.script.preempt_every
        if every and self.requests % every == 0:
            self.preemptions += 1
        return self.requests, len(tokens)

    def metrics_text(self) -> str:
        labels = f'{{engine="0",model_name="{self.script.model}"}}'
        usage = min(1.0, self.kv_tokens / self.script.kv_capacity_tokens)
        late = sorted(self.lateness) or [0.0]
        own = (f"fake:token_lateness_p50_ms {1000 * late[len(late) // 2]}\n"
               f"fake:token_lateness_p99_ms {1000 * late[int(len(late) * 0.99)]}\n")
        return own + "".join(f"# TYPE vllm:{name} {kind}\nvllm:{name}{labels} {value}\n" for name, kind,
                       value in (("num_preemptions_total", "counter", float(self.preemptions)),
                                 ("prefix_cache_queries_total", "counter", float(self.queries)),
                                 ("prefix_cache_hits_total", "counter", float(self.hits)),
                                 ("kv_cache_usage_perc", "gauge", usage),
                                 ("num_requests_running", "gauge", float(self.running))))


def _token_frame(kind: str, model: str, tokens: int = 1) -> bytes:
    """The bytes of one message of ``tokens`` tokens, as vLLM writes them (compact JSON)."""
    if kind == "chat":
        choice = {"index": 0, "delta": {"content": " tok" * tokens}, "logprobs": None,
                  "finish_reason": None}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": " tok" * tokens, "logprobs": None, "finish_reason": None,
                  "stop_reason": None}
        obj = "text_completion"
    token = {"id": "x", "object": obj, "created": 0, "model": model, "choices": [choice],
             "usage": None}
    return b"data: " + json.dumps(token, separators=(",", ":")).encode() + b"\n\n"


_ROLE = (b'data: {"id":"x","object":"chat.completion.chunk","created":0,"choices":[{"index":0,'
         b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
         b'"usage":null}\n\n')
_ERROR = b'data: {"error":{"message":"scripted engine error","code":500}}\n\ndata: [DONE]\n\n'


async def _stream(request: web.Request, kind: str) -> web.StreamResponse:
    state: _State = request.app["state"]
    arrived = asyncio.get_running_loop().time()
    body = await request.json()
    n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    prompt = body.get("prompt", "")
    if isinstance(prompt, dict):
        prompt = prompt.get("prompt_token_ids", [])
    if kind == "chat":
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    index, prompt_len = state.admit(prompt)
    if state.script.fail_every and index % state.script.fail_every == 0:
        return web.json_response({"error": {"message": "scripted failure", "code": 500}},
                                 status=500)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    state.running += 1
    state.kv_tokens += prompt_len
    try:
        sent = await _tokens(request, resp, kind, index, n, arrived, state)
    finally:
        state.running -= 1
        state.kv_tokens -= prompt_len
    if sent == n:
        if kind != "generate":
            usage = {"prompt_tokens": prompt_len, "total_tokens": prompt_len + n,
                     "completion_tokens": n}
            await resp.write(b'data: {"id":"x","choices":[],"usage":' +
                             json.dumps(usage, separators=(",", ":")).encode() +
                             b"}\n\ndata: [DONE]\n\n")
        await resp.write_eof()
    return resp


async def _tokens(request: web.Request, resp: web.StreamResponse, kind: str, index: int,
                  n: int, arrived: float, state: _State) -> int:
    """Write the token messages on schedule; returns how many were sent before any cut."""
    script = state.script
    loop = asyncio.get_running_loop()
    token = _token_frame(kind, script.model)
    sep = script.generate_sep.encode()
    itl = [x / 1000.0 for x in script.itl_ms]
    due = arrived + script.ttft_ms / 1000.0
    text = ""
    added = pending = 0
    every = script.stream_interval
    try:
        for k in range(n):
            if k:
                due += itl[(k - 1) % len(itl)]
            if (delay := due - loop.time()) > 0:
                await asyncio.sleep(delay)
            state.lateness.append(loop.time() - due)
            if k == n // 2 and script.abort_every and index % script.abort_every == 0:
                request.transport.abort()
                return k
            if k == n // 2 and script.error_every and index % script.error_every == 0:
                await resp.write(_ERROR)
                await resp.write_eof()
                return k
            state.kv_tokens += 1
            added += 1
            pending += 1
            text += " tok"
            if not (k == n - 1 or every and (k == 0 or pending >= every)):
                continue
            frame = token if pending == 1 else _token_frame(kind, script.model, pending)
            if kind == "generate":
                await resp.write(json.dumps({"text": [text]}).encode() + sep)
            elif k + 1 == pending and kind == "chat":  # vLLM sends the role first
                await resp.write(_ROLE + frame)
            else:
                await resp.write(frame)
            pending = 0
        return n
    finally:
        state.kv_tokens -= added


def build_app(script: FakeScript) -> web.Application:
    app = web.Application()
    app["state"] = _State(script)

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": script.model, "object": "model", "root": script.model,
             "max_model_len": 4096}]})

    async def metrics(request: web.Request) -> web.Response:
        if not script.metrics:
            raise web.HTTPNotFound()
        return web.Response(text=request.app["state"].metrics_text(),
                            content_type="text/plain")

    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="")

    def route(kind: str):
        return lambda request: _stream(request, kind)

    app.router.add_post("/v1/completions", route("completions"))
    app.router.add_post("/v1/chat/completions", route("chat"))
    app.router.add_post("/generate", route("generate"))
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    return app


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, FakeScript]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--itl-ms", default="5")
    for name in ("fail-every", "abort-every", "error-every", "preempt-every"):
        p.add_argument(f"--{name}", type=int, default=0)
    p.add_argument("--model", default="fake-model")
    p.add_argument("--kv-capacity-tokens", type=int, default=1_000_000)
    p.add_argument("--generate-sep", choices=("nul", "newline"), default="nul")
    p.add_argument("--no-metrics", action="store_true")
    p.add_argument("--stream-interval", type=int, default=1)
    # As `vllm serve` is started (tuner/engine/command.py): it serves the served name and
    # ignores the engine flags, so a study can run it through the runner.
    p.add_argument("--served-model-name")
    a, _ = p.parse_known_args(argv)
    a.model = a.served_model_name or a.model
    script = FakeScript(a.ttft_ms, tuple(float(x) for x in a.itl_ms.split(",")), a.fail_every,
                        a.abort_every, a.error_every, a.preempt_every, not a.no_metrics,
                        a.model, a.kv_capacity_tokens, "\0" if a.generate_sep == "nul" else "\n",
                        a.stream_interval)
    return a, script


async def _serve(host: str, port: int, script: FakeScript) -> None:
    runner = web.AppRunner(build_app(script), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # the port the OS chose for port 0
    print(f"LISTENING {bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    args, script = _parse_args(argv)
    asyncio.run(_serve(args.host, args.port, script))
    return 0


class FakeServer:
    """The fake server as a child process on a free loopback port (a context manager)."""

    def __init__(self, script: FakeScript = FakeScript(), host: str = "127.0.0.1",
                 cpu: int | None = None) -> None:
        self.script, self.host, self.cpu = script, host, cpu
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> FakeServer:
        cmd = [sys.executable, "-m", "tuner.testing.fake_server", "--host", self.host,
               "--port", "0", *self.script.to_argv()]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                     preexec_fn=self._pin if self.cpu is not None else None)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("LISTENING "):
            self.__exit__()
            raise RuntimeError(f"fake server did not start (said {line!r})")
        self.url = f"http://{self.host}:{int(line.split()[1])}"
        self._wait_healthy()
        return self

    def _pin(self) -> None:
        os.sched_setaffinity(0, {self.cpu})

    def _wait_healthy(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        stopped(self.proc, 5)
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None


if __name__ == "__main__":
    sys.exit(main())
