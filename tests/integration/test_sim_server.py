"""`tuner sim serve` as a real subprocess on loopback: vLLM's routes, refusals, and the
article's laws as the real load generator measures them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import aiohttp
import numpy as np
import pytest

from tuner.loadgen import LoadSpec, WorkloadSpec, run_benchmark
from tuner.loadgen.trace import read_trace
from tuner.testing.sim_trace import trace_itls_ms, trace_ttfts_ms
from tuner.engine.ports import free_port, reserved_port
from tuner.testing.sim_server import LLAMA3_8B, stop

pytestmark = pytest.mark.integration
TIME_SCALE = 1.0
SYNTHETIC = Path(__file__).resolve().parents[2] / "examples" / "traces" / "synthetic-mooncake.jsonl"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("models") / "llama3-8b"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    return d


def command(model_dir: Path, *flags: str, cli: bool = False) -> list[str]:
    """`python -m tuner.sim serve` (fast to start), or the full `tuner sim serve` CLI."""
    prog = ["-m", "tuner", "sim"] if cli else ["-m", "tuner.sim"]
    return [sys.executable, *prog, "serve", "--model", str(model_dir), *flags]


@contextlib.contextmanager
def server(model_dir: Path, *flags: str, time_scale: float = TIME_SCALE):
    """A simulator serving on a port reserved among this box's processes; (url, process)."""
    with contextlib.ExitStack() as stack:
        port = stack.enter_context(reserved_port())
        proc = subprocess.Popen(
            command(model_dir, "--host", "127.0.0.1", "--port", str(port), "--time-scale",
                    str(time_scale), "--load-format", "dummy", *flags),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stack.callback(stop, proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"server exited {proc.returncode}: {proc.stderr.read()}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", proc


async def _get(url: str) -> tuple[int, str, dict]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, await r.text(), dict(r.headers)


async def _stream(url: str, body: dict) -> list[bytes]:
    async with aiohttp.ClientSession() as s, s.post(url, json=body) as r:
        assert r.status == 200, await r.text()
        raw = await r.read()
    return [m for m in raw.split(b"\n\n") if m]


def test_routes_answer_as_vllm(model_dir):
    with server(model_dir, "--served-model-name", "llama3-8b") as (url, _):
        status, text, headers = asyncio.run(_get(url + "/health"))
        assert status == 200 and headers["X-Tuner-Sim-Time-Scale"] == str(TIME_SCALE)
        version = json.loads(asyncio.run(_get(url + "/version"))[1])
        assert version["simulated"] is True and version["time_scale"] == TIME_SCALE
        models = json.loads(asyncio.run(_get(url + "/v1/models"))[1])
        assert models["data"][0]["id"] == "llama3-8b"
        body = {"model": "llama3-8b", "prompt": list(range(100, 164)), "max_tokens": 5,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        msgs = asyncio.run(_stream(url + "/v1/completions", body))
        assert msgs[-1] == b"data: [DONE]"
        usage = json.loads(msgs[-2][6:])["usage"]
        assert usage == {"prompt_tokens": 64, "total_tokens": 69, "completion_tokens": 5}
        assert sum(b'"choices":[{' in m for m in msgs) == 5
        chat = {"model": "llama3-8b", "messages": [{"role": "user", "content": "a b c"}],
                "max_tokens": 3, "stream": True}
        assert asyncio.run(_stream(url + "/v1/chat/completions", chat))[-1] == b"data: [DONE]"
        metrics = asyncio.run(_get(url + "/metrics"))[1]
        for name in ("vllm:num_preemptions_total", "vllm:kv_cache_usage_perc",
                     "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                     "vllm:num_requests_running", "vllm:num_requests_waiting"):
            assert name in metrics
        queried = re.search(r'vllm:prefix_cache_queries_total\{[^}]*\} (\d+)', metrics)
        assert int(queried.group(1)) >= 64  # the 64 token ids, then the chat's few words


def test_the_trace_tells_when_each_request_arrived_and_its_tokens_went_out(model_dir):
    with server(model_dir, "--served-model-name", "llama3-8b", "--sim-trace") as (url, _):
        for n in (3, 6):
            body = {"model": "llama3-8b", "prompt": list(range(100, 164)), "max_tokens": n,
                    "ignore_eos": True, "stream": True}
            asyncio.run(_stream(url + "/v1/completions", body))
        trace = json.loads(asyncio.run(_get(url + "/sim/trace"))[1])["requests"]
    assert [len(r["written"]) for r in trace] == [3, 6]
    for r in trace:
        assert r["submitted"] <= r["written"][0] <= r["written"][-1]
    # the second request was sent after the first one's last token went out
    assert trace[1]["submitted"] > trace[0]["written"][-1]


def test_startup_lines_name_the_kv_cache(model_dir):
    with server(model_dir, "--max-model-len", "4096") as (_, proc):
        pass
    out = proc.stdout.read()
    assert re.search(r"GPU KV cache size: [\d,]+ tokens", out)
    assert "Maximum concurrency for 4,096 tokens per request:" in out


@pytest.mark.parametrize("flags, words", [
    (["--max-model-len", "2048", "--max-num-batched-tokens", "128", "--no-enable-chunked-prefill"],
     "max_num_batched_tokens (128) is smaller than max_model_len (2048)"),
    (["--gpu-memory-utilization", "0.12"], "To serve at least one request with the models's max seq len"),
    (["--gpu-memory-utilization", "0.05"], "No available memory for the cache blocks"),
    (["--max-num-batched-tokens", "64", "--max-num-seqs", "128"], "must be greater than or equal to max_num_seqs"),
])
def test_refused_start_exits_1_with_vllms_message(model_dir, flags, words):
    done = subprocess.run(command(model_dir, "--port", str(free_port()), *flags),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert words in done.stderr


@pytest.mark.parametrize("cli", [False, True])
def test_unknown_flag_is_a_usage_error(model_dir, cli):
    done = subprocess.run(command(model_dir, "--no-such-flag", "1", cli=cli), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in done.stderr


def test_the_tuner_cli_refuses_like_vllm(model_dir):
    done = subprocess.run(command(model_dir, "--gpu-memory-utilization", "0.05", cli=True),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "No available memory for the cache blocks" in done.stderr


def late_fraction(metrics_page: str) -> float:
    def value(name: str) -> float:
        return float(re.search(name + r"\{[^}]*\} (\S+)", metrics_page).group(1))
    return value("tuner_sim:late_steps_total") / max(1.0, value("tuner_sim:steps_total"))


def bench(model_dir: Path, flags: list[str], workload: WorkloadSpec, concurrency: int = 16,
          n: int = 64) -> dict:
    """One run of the real load generator; skips when the host cannot keep real time (the
    measurement would then describe the machine's load, not the modelled engine). Beside
    the client's figures, ``trace_p90_itl_ms`` and ``trace_median_itl_ms``: the ITL of the
    tokens' modelled due times (``--sim-trace``), which a client starved by a busy host does
    not move."""
    with server(model_dir, "--sim-trace", *flags) as (url, _):
        result = asyncio.run(run_benchmark(
            url, str(model_dir), workload,
            LoadSpec(max_concurrency=concurrency, num_requests=n, warmup_requests=0),
            time_scale=TIME_SCALE))
        late = late_fraction(asyncio.run(_get(url + "/metrics"))[1])
        trace = json.loads(asyncio.run(_get(url + "/sim/trace"))[1])
    assert sum(result.failures.values()) == 0, result.errors
    if late > 0.75:
        pytest.skip(f"host too busy to keep real time ({late:.0%} of steps late, client: "
                    f"{result.invalid_reason}); the offline tests cover the law")
    gaps_ms = trace_itls_ms(trace["requests"], trace["time_scale"])
    ttfts_ms = trace_ttfts_ms(trace["requests"], trace["time_scale"])
    return {**result.metrics, **{f"server_{k}": v for k, v in result.server.items()},
            "trace_median_ttft_ms": float(np.median(ttfts_ms)),
            "trace_p90_itl_ms": float(np.percentile(gaps_ms, 90)),
            "trace_median_itl_ms": float(np.median(gaps_ms))}


MIXED = WorkloadSpec(kind="random", input_len=1024, output_len=64, range_ratio=0.5,
                     vocab_size=128256, seed=1)


def test_chunked_prefill_small_budget_lowers_p99_itl_and_costs_throughput(model_dir):
    common = ["--max-model-len", "2048", "--max-num-seqs", "16", "--no-enable-prefix-caching"]
    small = bench(model_dir, common + ["--enable-chunked-prefill", "--max-num-batched-tokens", "128"], MIXED)
    off = bench(model_dir, common + ["--no-enable-chunked-prefill"], MIXED)
    # Prefill-first stalls a quarter of all decodes here, so p90 shows the law; p99 shows it
    # too on an idle host but on a loaded one it measures the host's hiccups, and so does
    # the client's p90 beside a busy loop: the law is read from the modelled token times.
    assert small["trace_p90_itl_ms"] < 0.5 * off["trace_p90_itl_ms"]
    assert small["output_throughput"] < off["output_throughput"]


def test_prefix_caching_skips_the_shared_prefill_on_shared_prefixes_only(model_dir):
    shared = WorkloadSpec(kind="shared-prefix", input_len=64, output_len=32, num_prefixes=2,
                          prefix_len=1536, vocab_size=128256, seed=2)
    common = ["--max-model-len", "2048"]
    on = bench(model_dir, common + ["--enable-prefix-caching"], shared)
    off = bench(model_dir, common + ["--no-enable-prefix-caching"], shared)
    # The cached prefix is not prefilled again: the modelled time to the first token falls
    # (read from the model's token times: the client's throughput beside other work on the
    # machine measures the host, decision 0040).
    assert on["trace_median_ttft_ms"] < 0.5 * off["trace_median_ttft_ms"], (on, off)
    assert on.get("server_prefix_cache_hits", 1) > 0
    rnd_on = bench(model_dir, common + ["--enable-prefix-caching"], MIXED)
    rnd_off = bench(model_dir, common + ["--no-enable-prefix-caching"], MIXED)
    # Random prompts share no block: no hits, and the same decode steps (the offline
    # evaluator shows the same throughput exactly: tests/unit/test_sim_grid.py). Read from
    # the modelled token times: under the whole suite's load the client's throughput
    # measured the host (decision 0040).
    assert rnd_on["server_prefix_cache_hits"] == 0
    assert rnd_on["trace_median_itl_ms"] == pytest.approx(rnd_off["trace_median_itl_ms"],
                                                          rel=0.1)


def test_enforce_eager_slows_decode_steps(model_dir):
    decode = WorkloadSpec(kind="random", input_len=64, output_len=64, vocab_size=128256, seed=3)
    graphs = bench(model_dir, ["--max-model-len", "2048"], decode, concurrency=8, n=32)
    eager = bench(model_dir, ["--max-model-len", "2048", "--enforce-eager"], decode,
                  concurrency=8, n=32)
    # TPOT rather than ITL: tokens that reach a busy client in one read have an ITL of 0.
    assert eager["median_tpot_ms"] > 1.2 * graphs["median_tpot_ms"]


def test_a_client_that_goes_away_frees_its_blocks(model_dir):
    async def run(url: str) -> str:
        body = {"model": str(model_dir), "prompt": list(range(100, 1100)), "max_tokens": 2000,
                "stream": True}
        async with aiohttp.ClientSession() as s:
            async with s.post(url + "/v1/completions", json=body) as r:
                await r.content.readline()  # first token, then hang up
            await asyncio.sleep(0.5)
            async with s.get(url + "/metrics") as r:
                return await r.text()

    with server(model_dir, "--max-model-len", "4096", "--no-enable-prefix-caching") as (url, _):
        metrics = asyncio.run(run(url))
    assert re.search(r"vllm:num_requests_running\{[^}]*\} 0", metrics)
    assert re.search(r"vllm:kv_cache_usage_perc\{[^}]*\} 0\.0\b", metrics)


def test_preemptions_show_in_metrics_when_blocks_run_out(model_dir):
    """As with vLLM's --num-gpu-blocks-override 17 and 8 long requests (VLLM.md). One
    request alone fits the 40 blocks (500 tokens, 32 blocks), any two that overlap do not,
    and each runs long enough that a client slowed by a busy machine still overlaps them."""
    async def run(url: str) -> str:
        async with aiohttp.ClientSession() as s:
            async def one(i: int) -> None:
                body = {"model": str(model_dir), "prompt": list(range(1000 * i, 1000 * i + 200)),
                        "max_tokens": 300, "stream": True}
                async with s.post(url + "/v1/completions", json=body) as r:
                    assert r.status == 200
                    await r.read()
            await asyncio.gather(*(one(i) for i in range(8)))
            async with s.get(url + "/metrics") as r:
                return await r.text()

    with server(model_dir, "--max-model-len", "512", "--num-gpu-blocks-override", "40",
                time_scale=4.0) as (url, _):
        metrics = asyncio.run(run(url))
    preempted = re.search(r"vllm:num_preemptions_total\{[^}]*\} (\d+)", metrics)
    assert int(preempted.group(1)) > 0
    assert re.search(r'vllm:request_success_total\{[^}]*\} 8\b', metrics)


def test_grid_over_a_study_file(tmp_path):
    """`tuner sim grid STUDY_FILE`: the study's model, GPU and workload, its whole space
    inside its rules, and the Pareto front of what started."""
    out = tmp_path / "front.json"
    proc = subprocess.run([sys.executable, "-m", "tuner", "sim", "grid", "studies/demo-sim.toml",
                           "--levels", "2", "--num-requests", "32", "--processes", "1",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["study"] == "studies/demo-sim.toml" and doc["gpu"] == "h200"
    assert doc["workload"]["num_requests"] == 32 and doc["workload"]["concurrency"] == 128
    assert set(doc["axes"]["max_num_batched_tokens"]) == {128, 32768}
    flags = [o["flags"] for o in doc["outcomes"]]
    assert len(flags) == doc["configurations"] > 0
    assert not any(f["enable_chunked_prefill"] and f["enable_prefix_caching"] for f in flags)
    front = [(o["output_throughput"], o["p99_itl_ms"]) for o in doc["pareto_front"]]
    started = [(o["output_throughput"], o["p99_itl_ms"]) for o in doc["outcomes"] if o["started"]]
    assert front and all(p in started for p in front)
    for t, i in front:  # nothing that started dominates a front point
        assert not any(t2 >= t and i2 <= i and (t2, i2) != (t, i) for t2, i2 in started)
    missing = subprocess.run([sys.executable, "-m", "tuner", "sim", "grid",
                              "studies/llama3-8b-h200.toml", "--out", str(out)],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "pass --model DIR" in missing.stderr


def test_sim_cpus_pins_the_server_and_refuses_a_bad_list(model_dir):
    cpu = max(os.sched_getaffinity(0))
    with server(model_dir, "--sim-cpus", str(cpu)) as (url, proc):
        assert os.sched_getaffinity(proc.pid) == {cpu}
        assert asyncio.run(_get(url + "/health"))[0] == 200
    bad = subprocess.run(command(model_dir, "--sim-cpus", "one"), capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "not a CPU list: 'one'" in bad.stderr
    absent = subprocess.run(command(model_dir, "--port", str(free_port()), "--sim-cpus",
                                    str(os.cpu_count() + 64)),
                            capture_output=True, text=True, timeout=60)
    assert absent.returncode == 2 and "--sim-cpus" in absent.stderr


def _replay(model_dir: Path, trace: Path, n: int, speedup: float) -> tuple[dict, list[int]]:
    """One replay against a fresh simulator: (the result's metrics and server view, the
    output tokens the server wrote per request)."""
    workload = WorkloadSpec(kind="trace", trace=str(trace), vocab_size=128256)
    load = LoadSpec(max_concurrency=None, speedup=speedup, num_requests=n, warmup_requests=0,
                    max_client_lag_ms=1000, min_gap_share=0.0)
    with server(model_dir, "--sim-trace") as (url, _):
        result = asyncio.run(run_benchmark(url, str(model_dir), workload, load))
        written = json.loads(asyncio.run(_get(url + "/sim/trace"))[1])["requests"]
    assert result.failures == {} or sum(result.failures.values()) == 0, result.errors
    return {**result.metrics, **result.server}, [len(r["written"]) for r in written]


def test_the_synthetic_trace_replays_with_its_lengths_and_its_prefix_sharing(model_dir,
                                                                             tmp_path):
    n, records = 60, read_trace(SYNTHETIC)[:60]
    got, written = _replay(model_dir, SYNTHETIC, n, speedup=5.0)
    assert got["completed"] == n and got["failed"] == 0
    assert Counter(written) == Counter(r.output_tokens for r in records)
    assert got["total_input_tokens"] == sum(r.input_tokens for r in records)
    assert got["prefix_cache_hits"] > 0
    # a replay is paced: judged on its steady requests, as a run at a finite rate is
    assert got["window_p99_ttft_ms"] > 0
    # the same requests without their hash ids share nothing: no prefix hits
    unshared = tmp_path / "unshared.jsonl"
    unshared.write_text("".join(
        json.dumps({**json.loads(line), "hash_ids": []}) + "\n"
        for line in SYNTHETIC.read_text().splitlines()))
    alone, written = _replay(model_dir, unshared, n, speedup=5.0)
    assert alone["completed"] == n and Counter(written) == Counter(r.output_tokens for r in records)
    assert alone["prefix_cache_hits"] == 0
