"""Issue 47 (cases 6 and 9): `tuner bench` against hostile servers. A real `tuner bench`
process meets a real server on loopback that closes mid-stream, answers HTTP 500, sends
garbage instead of SSE, never answers, or sends a 100 MB body. Each run ends, well before
the test's deadline, in one clear line (exit 1: no request succeeded, with the reason each
failed request recorded), and its peak memory stays far below what buffering the 100 MB
body even once or twice would take. Before, a server that never answered held `tuner
bench` for its 6-hour default (there was no --request-timeout), the model lookup's timeout
said nothing (".../v1/models: ; is the server up?"), and the 100 MB line was buffered
whole, with its copies."""

from __future__ import annotations

import os
import sys

import pytest

from tuner.testing.hostile_server import HostileServer
from tuner.testing.measured import Measured, run_measured

pytestmark = pytest.mark.integration

DEADLINE_S = 180.0  # generous: the runs take seconds, on a machine shared with others
MAX_RSS_BYTES = 300 << 20  # the client holds at most one capped message, never the body
REQUEST_TIMEOUT = "3s"
# Each failed request's recorded reason, by mode and HTTP client.
REASONS = {
    ("close-mid-stream", "fast"): "ConnectionResetError",
    ("close-mid-stream", "aiohttp"): "ClientPayloadError",
    ("http-500", "fast"): "http_500",
    ("http-500", "aiohttp"): "http_500",
    ("garbage", "fast"): "no_content",
    ("garbage", "aiohttp"): "no_content",
    ("silent", "fast"): "TimeoutError",
    ("silent", "aiohttp"): "TimeoutError",
    ("huge-body", "fast"): "oversized_message",
    ("huge-body", "aiohttp"): "oversized_message",
}


def bench(url: str, *extra: str, timeout: str | None = REQUEST_TIMEOUT) -> Measured:
    """`tuner bench` on two requests, one at a time; ``extra`` may override the options
    (argparse takes the last of a repeated one)."""
    argv = [sys.executable, "-m", "tuner", "bench", "--url", url, "--num-requests", "2",
            "--max-concurrency", "1", "--warmup", "0", "--input-len", "16", "--output-len",
            "8", "--no-progress", *(["--request-timeout", timeout] if timeout else []), *extra]
    return run_measured(argv, DEADLINE_S, env={**os.environ, "OPENAI_API_KEY": ""},
                        max_memory_bytes=4 << 30)


def ends_in_one_line(run: Measured, *words: str) -> str:
    """The run ended by itself, exit 1, with one line on stderr holding ``words``."""
    assert run.returncode is not None, f"still running after {DEADLINE_S} s: {run.stderr}"
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and len(lines) == 1, run.stderr
    assert lines[0].startswith("tuner: error: ") and "Traceback" not in run.stderr, lines
    assert all(w in lines[0] for w in words), lines[0]
    assert run.peak_rss_bytes < MAX_RSS_BYTES, f"peak RSS {run.peak_rss_bytes >> 20} MiB"
    return lines[0]


@pytest.mark.parametrize("mode,client", sorted(REASONS), ids=[f"{m}-{c}" for m, c in
                                                             sorted(REASONS)])
def test_a_hostile_server_fails_every_request_clearly(mode, client):
    with HostileServer(mode) as server:
        run = bench(server.url, "--model", "m", "--http-client", client)
        assert server.requests >= 2  # the two requests were sent (and /metrics read)
    reason = REASONS[mode, client]
    ends_in_one_line(run, f"no request succeeded: {reason}", "first error")
    # the summary still reports the run: failed requests are data, with their reason
    assert "Failed requests:" in run.stdout and f"{reason}:" in run.stdout, run.stdout


def test_a_model_lookup_that_gets_no_answer_says_so():
    with HostileServer("silent") as server:
        run = bench(server.url)
    ends_in_one_line(run, "/v1/models", "no answer within 3 s", "is the server up")


def test_a_model_lookup_on_a_huge_page_is_cut_short():
    with HostileServer("huge-body") as server:
        run = bench(server.url)
    ends_in_one_line(run, "/v1/models", "larger than")


@pytest.mark.parametrize("value", ["0", "inf", "-5", "soon", "nan"])
def test_a_bad_request_timeout_is_a_usage_error(value):
    run = bench("http://127.0.0.1:9", "--model", "m", timeout=value)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith("tuner: error: ") and "request_timeout" in lines[0].replace(
        "-", "_"), lines


@pytest.mark.parametrize("option,value,words", [
    ("--num-requests", "1000000000000", ["num_requests", "1000000"]),
    ("--max-concurrency", "1000000000000", ["max_concurrency", "65536"]),
    ("--input-len", "1000000000000", ["input_len"]),
    ("--duration", "inf", ["duration_s", "inf"]),
    ("--request-rate", "nan", ["request_rate", "nan"]),
    ("--slo-itl-ms", "inf", ["itl_p99_ms", "inf"]),
    ("--time-scale", "inf", ["--time-scale"]),
    ("--max-client-lag-ms", "inf", ["max_client_lag_ms", "inf"]),
])
def test_huge_or_infinite_sizes_are_usage_errors(option, value, words):
    """Seen case 6 of issue 47: 10**12 requests were accepted, and the client grew until
    memory ran out (here its address space is capped, so it would fail alone)."""
    run = bench("http://127.0.0.1:9", "--model", "m", option, value, timeout=None)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith("tuner: error: ") and all(w in lines[0] for w in words), lines
