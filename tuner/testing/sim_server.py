"""A simulated vLLM server (``python -m tuner.sim serve``) as a real subprocess on loopback,
for tests and benchmarks that drive it with the real load generator.

    with sim_server(tmp_path, "--gpu", "l4", time_scale=10.0) as url:
        ...  # url serves /v1/completions, /metrics; the model's name is MODEL_NAME
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tuner.engine.ports import reserved_port

# The shape of Llama-3-8B (a config.json is all the simulator reads of a model folder).
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
             "vocab_size": 128256, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
MODEL_NAME = "llama3-8b"
READY_S = 30.0


def model_folder(parent: Path, config: dict = LLAMA3_8B) -> Path:
    """A model folder under ``parent`` holding only ``config.json``."""
    folder = parent / MODEL_NAME
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@contextlib.contextmanager
def sim_server(parent: Path, *flags: str, time_scale: float = 1.0) -> Iterator[str]:
    """Start the simulator with ``flags`` (``vllm serve``'s, plus ``--gpu``...) on a free
    port (its output in ``parent/sim-PORT.log``), yield its URL once ``/health`` answers,
    stop it (SIGTERM, then SIGKILL) after.
    RuntimeError when it exits or is not ready within ``READY_S`` seconds."""
    with reserved_port() as port:  # not drawn by the servers other tests start meanwhile
        cmd = [sys.executable, "-m", "tuner.sim", "serve", "--model",
               str(model_folder(parent)), "--served-model-name", MODEL_NAME, "--host",
               "127.0.0.1", "--port", str(port), "--time-scale", str(time_scale),
               "--load-format", "dummy", *flags]
        log = parent / f"sim-{port}.log"  # a file, not a pipe: a full pipe would stall it
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, proc, log)
            yield url
        finally:
            stop(proc)


def stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``grace_s`` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the simulator exited with {proc.returncode}: "
                               f"{log.read_text()[-2000:]}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return
        time.sleep(0.05)
    raise RuntimeError(f"the simulator was not ready within {READY_S:g} s")
