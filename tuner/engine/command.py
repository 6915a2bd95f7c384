"""The engine decides only the command line and the environment of a trial's server.

``vllm``: the study's python with ``-m vllm.entrypoints.openai.api_server`` (or its explicit
``command``); ``sim``: this Python with ``-m tuner sim serve``. Both get the same `vllm serve`
flags, so one code path runs them. Pure: nothing here starts a process.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from tuner.settings import Settings
from tuner.space.argv import flags_argv
from tuner.spec.study import StudySpec

VLLM_MODULE = "vllm.entrypoints.openai.api_server"

# vLLM's compile caches (torch.compile and its AOT artefacts under VLLM_CACHE_ROOT, Inductor's
# FX graphs and Triton's kernels), kept in one folder of the box that outlives trials and
# worker restarts: a start whose compile key was seen before loads instead of compiling,
# several times faster (docs/starts.md has the measured figures).
CACHE_VARS = {"VLLM_CACHE_ROOT": "vllm", "TORCHINDUCTOR_CACHE_DIR": "inductor",
              "TRITON_CACHE_DIR": "triton"}

# A pre-imported start (engine.start) also forks vLLM's engine core instead of spawning
# it: a spawned engine core imports torch and vLLM again, 26 s of an H100 start that fork
# takes to 2 s (results/h100/start-profile/, docs/starts.md). The study's engine.env wins.
PREIMPORTED_ENV = {"VLLM_WORKER_MULTIPROC_METHOD": "fork"}

# What an engine process inherits from the worker: what a shell, Python, CUDA, NCCL,
# PyTorch, Triton, the BLAS libraries, Hugging Face's cache and vLLM itself read. Nothing
# else: the storage URL (TUNER_STORAGE*), cloud and database credentials stay with the
# worker. A name that looks like a credential is dropped even under an allowed prefix.
INHERITED = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ",
                       "TMPDIR", "TERM", "VIRTUAL_ENV", "CONDA_PREFIX", "CUDA_HOME",
                       "DO_NOT_TRACK"})
INHERITED_PREFIXES = ("LC_", "XDG_", "PYTHON", "LD_", "VLLM_", "CUDA_", "NVIDIA_", "NCCL_",
                      "TORCH", "PYTORCH_", "TRITON_", "OMP_", "MKL_", "KMP_", "OPENBLAS_",
                      "HF_", "TRANSFORMERS_", "TOKENIZERS_")
CREDENTIAL = re.compile(r"PASSW|(^|_)(TOKENS?|SECRETS?|PASS|PW|CREDENTIALS?|KEYS?|"
                        r"APIKEY|AUTH|COOKIE)(_|$)", re.I)


def engine_environment(worker_env: Mapping[str, str], launch: "Launch") -> dict[str, str]:
    """The whole environment of an engine process: the allowed part of the worker's, then
    the trial's own (the study's engine.env and CUDA_VISIBLE_DEVICES)."""
    kept = {k: v for k, v in worker_env.items()
            if (k in INHERITED or k.startswith(INHERITED_PREFIXES))
            and not CREDENTIAL.search(k) and not k.startswith("TUNER_")}
    # The worker's operator may pass more on by name (e.g. HF_TOKEN for gated downloads).
    passed = Settings.from_env(worker_env).engine_pass_env
    kept.update({k: worker_env[k] for k in passed if k in worker_env})
    return {**kept, **launch.env}


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: Mapping[str, str]


def program(spec: StudySpec) -> list[str]:
    """The words before the flags: which program serves."""
    eng = spec.engine
    if eng.kind == "sim":
        return [sys.executable, "-m", "tuner.sim", "serve", "--gpu", spec.hardware.gpu,
                "--time-scale", f"{eng.time_scale:g}"]
    if eng.command:
        return list(eng.command)
    return [eng.python, "-m", eng.module or VLLM_MODULE]


def missing_program(spec: StudySpec) -> str | None:
    """The engine's program when this host has no such executable, else None."""
    first = program(spec)[0]
    return None if shutil.which(first) else first


def served_name(spec: StudySpec) -> str:
    return spec.model.served_name or os.path.basename(spec.model.path.rstrip("/"))


def cache_env(root: Path, inherited: Mapping[str, str]) -> dict[str, str]:
    """The compile-cache variables under ``root``, except those ``inherited`` already sets
    (a box's own VLLM_CACHE_ROOT wins)."""
    return {var: str(root / sub) for var, sub in CACHE_VARS.items() if var not in inherited}


def launch(spec: StudySpec, flags: Mapping[str, Any], port: int, gpus: Sequence[int],
           host: str = "127.0.0.1", cache_root: Path | None = None,
           inherited: Mapping[str, str] | None = None) -> Launch:
    """The argv (a list, never a shell string) and environment of one server.

    With ``cache_root``, a server keeps its compile caches there (``cache_env``; the
    simulator keeps its compile-key markers under ``VLLM_CACHE_ROOT``); a pre-imported
    vLLM server gets ``PREIMPORTED_ENV``; the study's own engine.env wins over both."""
    argv = program(spec) + [
        "--model", spec.model.path, "--served-model-name", served_name(spec),
        "--host", host, "--port", str(port), "--dtype", spec.model.dtype,
        *spec.engine.extra_args, *flags_argv(flags)]
    tp = int(flags.get("tensor_parallel_size", spec.model.tensor_parallel_size))
    vllm = spec.engine.kind == "vllm"
    caches = cache_env(cache_root, inherited or {}) if cache_root is not None else {}
    fork = PREIMPORTED_ENV if vllm and spec.engine.start == "preimported" else {}
    env = {**fork, **caches, **spec.engine.env,
           "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus[:max(tp, 1)])}
    return Launch(tuple(argv), env)
