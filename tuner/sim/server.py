"""The HTTP front of the simulated engine: vLLM's OpenAI-compatible routes on aiohttp.

``run(args, core)`` serves a started engine core (see ``launch.py`` for the checks before)
until SIGINT/SIGTERM. Token timing comes from ``RealtimeEngine``; nothing here sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import time
from collections import deque

from aiohttp import web

from tuner.sim import openai
from tuner.sim.core import EngineCore
from tuner.sim.engine import RealtimeEngine
from tuner.sim.metrics import metrics_text

VLLM_VERSION = "0.24.0"
KEY = web.AppKey("sim", dict)


async def _health(request: web.Request) -> web.Response:
    sim = request.app[KEY]
    return web.Response(headers={"X-Tuner-Sim-Time-Scale": str(sim["engine"].time_scale)})


async def _version(request: web.Request) -> web.Response:
    sim = request.app[KEY]
    return web.json_response({"version": VLLM_VERSION, "simulated": True,
                              "time_scale": sim["engine"].time_scale, "gpu": sim["gpu"]})


async def _models(request: web.Request) -> web.Response:
    sim = request.app[KEY]
    return web.json_response({"object": "list", "data": [{
        "id": sim["name"], "object": "model", "created": sim["created"], "owned_by": "vllm",
        "root": sim["root"], "parent": None, "max_model_len": sim["core"].cfg.max_model_len}]})


async def _metrics(request: web.Request) -> web.Response:
    sim = request.app[KEY]
    return web.Response(text=metrics_text(sim["core"], sim["name"], sim["engine"].late_steps),
                        content_type="text/plain", charset="utf-8")


async def _trace(request: web.Request) -> web.Response:
    sim = request.app[KEY]
    return web.json_response({"time_scale": sim["engine"].time_scale,
                              "requests": list(sim["trace"] or ()),
                              "steps": sim["engine"].step_log or []})


def _handler(kind: str):
    async def handle(request: web.Request) -> web.StreamResponse:
        sim = request.app[KEY]
        try:
            body = await request.json()
            req = openai.parse(kind, body)
            if req.model is not None and req.model != sim["name"] and kind != "generate":
                return web.Response(status=404, content_type="application/json",
                                    body=openai.error_body(f"The model `{req.model}` does not exist.",
                                                           404, "NotFoundError"))
            openai.check_length(req, sim["core"].cfg.max_model_len)
        except (ValueError, openai.BadRequest) as e:
            return web.Response(status=400, body=openai.error_body(str(e), 400),
                                content_type="application/json")
        return await _generate(request, sim, req)
    return handle


async def _generate(request: web.Request, sim: dict, req: openai.ParsedRequest) -> web.StreamResponse:
    engine: RealtimeEngine = sim["engine"]
    cfg = sim["core"].cfg
    hashes = openai.hashes_for(req, cfg.block_size, cfg.enable_prefix_caching)
    done: asyncio.Future = asyncio.get_running_loop().create_future()
    if not req.stream:
        def on_token(index: int, finished: bool, due: float) -> None:
            if finished and not done.done():
                done.set_result(index)
        job = engine.submit(len(req.token_ids), req.max_tokens, hashes, on_token)
        try:
            n = await done
        except asyncio.CancelledError:
            engine.abort(job)
            raise
        return web.json_response(openai.full_response(req, sim["name"], n, cfg.kv_cache_dtype))
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache"})
    await resp.prepare(request)
    writer = resp._payload_writer  # aiohttp buffers headers until the first body write
    if hasattr(writer, "send_headers"):
        writer.send_headers()
    stream = TokenStream(request.transport, openai.StreamFormat(req, sim["name"]), done,
                         sim["trace"], req.token_ids[:8])
    job = engine.submit(len(req.token_ids), req.max_tokens, hashes, stream.on_token)
    try:
        await done
    except asyncio.CancelledError:
        engine.abort(job)
        raise
    if stream.broken:
        engine.abort(job)
        return resp
    await resp.write_eof()
    return resp


class TokenStream:
    """Writes one request's tokens straight to its socket, called from the engine's step."""

    __slots__ = ("transport", "fmt", "done", "first", "broken", "trace", "head", "due", "written",
                 "submitted")

    def __init__(self, transport, fmt: openai.StreamFormat, done: asyncio.Future,
                 trace: deque | None, head: list[int]) -> None:
        self.transport, self.fmt, self.done = transport, fmt, done
        self.first, self.broken = True, False
        self.trace, self.head = trace, head
        self.due: list[float] = []
        self.written: list[float] = []
        self.submitted = time.perf_counter()  # when the request reached the engine

    def on_token(self, index: int, finished: bool, due: float) -> None:
        fmt = self.fmt
        data = fmt.chunk(index, finished)
        if self.first:
            data, self.first = fmt.first + data, False
        if finished:
            data += fmt.tail(index)
        transport = self.transport
        if transport is None or transport.is_closing():
            self.broken = True
        else:  # one HTTP/1.1 chunk
            transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        if self.trace is not None:
            self.due.append(due)
            self.written.append(time.perf_counter())
            if finished:
                self.trace.append({"prompt_head": self.head, "submitted": self.submitted,
                                   "due": self.due, "written": self.written})
        if (finished or self.broken) and not self.done.done():
            self.done.set_result(index)


def build_app(core: EngineCore, engine: RealtimeEngine, name: str, root: str, gpu: str,
              trace: bool = False) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[KEY] = {"core": core, "engine": engine, "name": name, "root": root, "gpu": gpu,
                "created": int(time.time()), "trace": deque(maxlen=100_000) if trace else None}
    app.router.add_get("/health", _health)
    app.router.add_get("/ping", _health)
    app.router.add_get("/version", _version)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/sim/trace", _trace)
    app.router.add_post("/v1/completions", _handler("completions"))
    app.router.add_post("/v1/chat/completions", _handler("chat"))
    app.router.add_post("/generate", _handler("generate"))

    async def lifecycle(app: web.Application):
        engine.start()
        yield
        await engine.stop()

    app.cleanup_ctx.append(lifecycle)
    return app


async def _serve(args, core: EngineCore) -> None:
    model_dir = args.model or args.model_tag
    name = (args.served_model_name or [model_dir])[0]
    engine = RealtimeEngine(core, args.time_scale)
    if args.sim_trace:
        engine.step_log = []
    app = build_app(core, engine, name, str(model_dir), args.gpu, args.sim_trace)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=1024)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"INFO:     Started server process (simulated engine, time scale {args.time_scale:g})",
          flush=True)
    print("INFO:     Application startup complete.", flush=True)
    print(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)",
          flush=True)
    # Fewer, cheaper collections: a full collection over every live object stalls the loop
    # (and every stream's next token) for milliseconds.
    gc.freeze()
    gc.set_threshold(50_000, 20, 1000)
    await stop.wait()
    print("INFO:     Shutting down", flush=True)
    await runner.cleanup()


def run(args, core: EngineCore) -> int:
    """Serve ``core`` until SIGINT/SIGTERM."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args, core))
    return 0
