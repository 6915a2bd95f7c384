"""Reading a server's log: KV-cache size, vLLM version, and why a server failed.

Pure functions over text, so they are tested on real log excerpts.
"""

from __future__ import annotations

import re

KV_TOKENS = re.compile(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens")
VERSION = re.compile(r"vLLM API server version ([\w.+-]+)|Starting vLLM API server.*?version ([\w.+-]+)")

# Failure classes, checked in order; each is (class, patterns over the log).
CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("oom", ("CUDA out of memory", "OutOfMemoryError", "out of memory")),
    ("kv-cache-too-small", ("larger than the available KV cache memory",
                            "larger than the maximum number of tokens that can be stored in KV",
                            "No available memory for the cache blocks",
                            "insufficient KV cache")),
    ("rejected-flags", ("unrecognized arguments", "error: argument", "invalid choice",
                        "is smaller than max_model_len", "must be greater than or equal to",
                        "ValueError", "ValidationError", "TypeError")),
)
TAIL_LINES = 40
# A failure's reason line is one line of a message: a Python traceback's last line fits.
REASON_CHARS = 500


def kv_cache_tokens(log: str) -> int | None:
    m = KV_TOKENS.search(log)
    return int(m.group(1).replace(",", "")) if m else None


def vllm_version(log: str) -> str | None:
    m = VERSION.search(log)
    return (m.group(1) or m.group(2)) if m else None


ASYNC_ON = re.compile(r"Asynchronous scheduling is enabled")
ASYNC_OFF = re.compile(r"[Aa]sync(?:hronous)? scheduling is disabled|"
                       r"does not support async scheduling|"
                       r"async scheduling is only supported")
NON_DEFAULT_INTERVAL = re.compile(r"non-default args:.*?'stream_interval': (\d+)")
STREAM_INTERVAL_DEFAULT = 1  # vLLM's SchedulerConfig.stream_interval


def async_scheduling(log: str, flags: dict) -> bool | None:
    """Whether the server scheduled asynchronously: the launch flag if given, else what
    vLLM logged at start ("Asynchronous scheduling is enabled." or a line saying it is
    off); None when neither says."""
    if "async_scheduling" in flags:
        return bool(flags["async_scheduling"])
    if ASYNC_OFF.search(log):
        return False
    return True if ASYNC_ON.search(log) else None


def stream_interval(log: str, flags: dict) -> int:
    """Tokens per streamed message: the launch flag, else vLLM's logged non-default args,
    else vLLM's default (1)."""
    if flags.get("stream_interval") is not None:
        return int(flags["stream_interval"])
    m = NON_DEFAULT_INTERVAL.search(log)
    return int(m.group(1)) if m else STREAM_INTERVAL_DEFAULT


def classify_start_failure(returncode: int | None, log: str) -> str:
    """Why a server did not become healthy: one of oom, kv-cache-too-small, rejected-flags,
    start-timeout (still running, or killed by us), crash (exited for another reason)."""
    if returncode is None:
        return "start-timeout"
    for name, patterns in CLASSES:
        if any(p in log for p in patterns):
            return name
    return "crash"


def reason_line(log: str) -> str:
    """The most telling line of a failure: the last error-looking line, else the last."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for line in reversed(lines):
        if re.search(r"Error|error:|Exception|refus|out of memory", line):
            return line[:REASON_CHARS]
    return lines[-1][:REASON_CHARS] if lines else ""


def tail(log: str, n: int = TAIL_LINES) -> str:
    return "\n".join(log.splitlines()[-n:])
