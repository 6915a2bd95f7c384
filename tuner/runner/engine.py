"""The engine decides only the command line and the environment of a trial's server.

``vllm``: the study's python with ``-m vllm.entrypoints.openai.api_server`` (or its explicit
``command``); ``sim``: this Python with ``-m tuner sim serve``. Both get the same `vllm serve`
flags, so one code path runs them. Pure: nothing here starts a process.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tuner.space.argv import flags_argv
from tuner.study.spec import StudySpec

VLLM_MODULE = "vllm.entrypoints.openai.api_server"


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


def served_name(spec: StudySpec) -> str:
    return spec.model.served_name or os.path.basename(spec.model.path.rstrip("/"))


def launch(spec: StudySpec, flags: Mapping[str, Any], port: int, gpus: Sequence[int],
           host: str = "127.0.0.1") -> Launch:
    """The argv (a list, never a shell string) and environment of one server."""
    argv = program(spec) + [
        "--model", spec.model.path, "--served-model-name", served_name(spec),
        "--host", host, "--port", str(port), "--dtype", spec.model.dtype,
        *spec.engine.extra_args, *flags_argv(flags)]
    tp = int(flags.get("tensor_parallel_size", spec.model.tensor_parallel_size))
    env = {**spec.engine.env, "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus[:max(tp, 1)])}
    return Launch(tuple(argv), env)
