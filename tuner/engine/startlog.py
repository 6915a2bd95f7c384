"""A vLLM start, phase by phase, from its log (pure): what the start time was spent on.

vLLM 0.24 prints, in order (its API server, then its engine core process):

    (APIServer pid=838) INFO 12-01 08:33:21 [api_utils.py:339] ... version 0.24.0
    (EngineCore pid=963) INFO 12-01 08:34:13 [core.py:114] Initializing a V1 LLM engine ...
    ... [model_runner.py:302] Model loading took 14.96 GiB and 1.870437 seconds
    ... [backends.py:292] Directly load the compiled graph(s) for compile range (1, 2048)
        from the cache, took 1.311 s                       (a compile-cache hit), or
    ... [backends.py:393] Compiling a graph for compile range (1, 8192) takes 12.76 s
    ... [monitor.py:53] torch.compile took 27.83 s in total
    ... [monitor.py:81] Initial profiling/warmup run took 0.52 s
    ... [kv_cache_utils.py:2146] GPU KV cache size: 920,192 tokens
    ... [model_runner.py:726] Graph capturing finished in 5 secs, took 0.98 GiB
    ... [core.py:337] init engine (profile, create kv cache, warmup model) took 52.92 s
    (APIServer pid=838) INFO:     Application startup complete.

``start_phases`` returns seconds per phase. Stated durations (``took X s``) are used where
vLLM prints them; the rest are differences between line stamps (whole seconds):

    process_start   the spawn -> the first log line (``with_process_start``: the runner's
                    measured start less ``logged``; imports before vLLM logs anything)
    api_start       first log line -> the engine core's first line (imports, config, spawn)
    engine_start    the engine core's first line -> weights loaded (distributed init, load)
    weights         the load itself, as stated
    compile         torch.compile in total, as stated (compile_cache: hit | miss | none)
    kv_profile      the profiling run, as stated, and the KV-cache sizing after it
    graph_capture   CUDA-graph capture, as stated
    warmup          graph capture (eager: KV sizing) -> init engine done (kernel warm-up,
                    JIT and autotuning: long for a new budget, short once it was seen;
                    docs/starts.md has the figures)
    init_engine     the engine core's stated total (profile, KV cache, warm-up)
    api_ready       init engine done -> the API server's startup complete
    logged          first to last of these lines

A phase whose lines are missing (an eager start has no compile) is absent.
"""

from __future__ import annotations

import re
from datetime import datetime

_STAMP = re.compile(r"(?:INFO|WARNING|DEBUG|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d) ")
_ENGINE = re.compile(r"\(EngineCore[^)]*\) ")
_TOOK = {
    "weights": re.compile(r"Model loading took [\d.]+ GiB and ([\d.]+) seconds"),
    "compile": re.compile(r"torch\.compile took ([\d.]+) s in total"),
    "profile_run": re.compile(r"Initial profiling/warmup run took ([\d.]+) s"),
    "graph_capture": re.compile(r"Graph capturing finished in ([\d.]+) secs"),
    "init_engine": re.compile(r"init engine \(profile, create kv cache, warmup model\) took "
                              r"([\d.]+) s"),
}
_MARKS = {
    "weights": "Model loading took",
    "profile_run": "Initial profiling/warmup run took",
    "kv_size": "KV cache size:",
    "graph_capture": "Graph capturing finished",
    "init_engine": "init engine (profile, create kv cache",
    "ready": "Application startup complete",
}
_HIT = ("Directly load the compiled graph", "Directly load AOT compilation")
_MISS = ("Compiling a graph for compile range",)
_RANGE = re.compile(r"compile range \((\d+), (\d+)\)")


def _seconds(stamp: str) -> float:
    t = datetime.strptime(stamp, "%m-%d %H:%M:%S")
    return ((t.month * 31 + t.day) * 24 + t.hour) * 3600 + t.minute * 60 + t.second


def _stamps(log: str) -> tuple[float | None, float | None, dict[str, float], float | None]:
    """(first line, engine core's first line, each mark's line, last line), in seconds."""
    first = engine = last = None
    marks: dict[str, float] = {}
    for line in log.splitlines():
        m = _STAMP.search(line)
        if "Application startup complete" in line and last is not None:
            marks.setdefault("ready", last)  # uvicorn's line has no stamp: the one before
        if not m:
            continue
        t = _seconds(m.group(1))
        first = t if first is None else first
        if engine is None and _ENGINE.search(line):
            engine = t
        for name, text in _MARKS.items():
            if text in line:
                marks.setdefault(name, t)
        last = t
    return first, engine, marks, last


def start_phases(log: str) -> dict[str, float | str]:
    """Seconds per start phase (see the module docstring), and ``compile_cache`` and
    ``compile_range`` when the log shows a compile."""
    out: dict[str, float | str] = {}
    for name, pattern in _TOOK.items():
        m = pattern.search(log)
        if m:
            out[name] = float(m.group(1))
    first, engine, marks, last = _stamps(log)
    if first is not None and engine is not None:
        out["api_start"] = engine - first
        if "weights" in marks:
            out["engine_start"] = marks["weights"] - engine
    if "kv_size" in marks and "profile_run" in marks:
        out["kv_profile"] = round(out.get("profile_run", 0.0) + marks["kv_size"]
                                  - marks["profile_run"], 3)
    before_warmup = marks.get("graph_capture", marks.get("kv_size"))
    if before_warmup is not None and "init_engine" in marks:
        out["warmup"] = marks["init_engine"] - before_warmup
    if "init_engine" in marks and "ready" in marks:
        out["api_ready"] = marks["ready"] - marks["init_engine"]
    if first is not None and last is not None and "ready" in marks:
        out["logged"] = marks["ready"] - first
    out.pop("profile_run", None)
    if "compile" in out:
        out["compile_cache"] = ("hit" if any(h in log for h in _HIT) else
                                "miss" if any(m in log for m in _MISS) else "none")
        r = _RANGE.search(log)
        if r:
            out["compile_range"] = f"{r.group(1)}-{r.group(2)}"
    return out


def with_process_start(phases: dict, start_s: float | None) -> dict:
    """Adds ``process_start``: from the spawn to vLLM's first log line (Python's imports
    before the banner), the runner's measured start less what the log covers."""
    if start_s is not None and "logged" in phases:
        return {**phases, "process_start": round(max(0.0, start_s - phases["logged"]), 2)}
    return phases
