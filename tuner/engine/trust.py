"""What a worker agrees to run: a stored study chooses flags, never the program.

A study is stored in the shared database, and anyone who can write that database can change
it. So a worker does not take the program from it: ``engine.python``, ``engine.module`` and
``engine.command`` must match this worker's own allow-list (``TUNER_ALLOWED_ENGINES``:
entries separated by ';', each a command line; an entry of one word is a Python that runs
vLLM's server module), by default the Python given with ``tuner worker --engine-python`` or
``TUNER_ENGINE_PYTHON`` (else ``python3``). ``engine.env`` may set only engine settings
(VLLM_*, CUDA_*, NCCL_*, ...; never LD_*, PYTHON* or PATH, which load code), and
``engine.extra_args`` may not name code to import (``--trust-remote-code`` and the flags
that take a class or module). ``--trust-stored-engine`` lifts all of this, for a database
that only trusted people can write. The simulator is tuner's own code: its program is always
allowed, but its ``extra_args`` are checked as vLLM's are, and it takes no ``engine.env`` at
all (``StudySpec`` refuses one, stored or not): nothing a simulated study needs is set there.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from tuner.errors import UsageError
from tuner.settings import settings
from tuner.engine.command import VLLM_MODULE, program
from tuner.spec.study import StudySpec

# engine.env names a stored study may set without trust: settings of the engine's
# libraries, none of which loads code from a path.
SETTING_PREFIXES = ("VLLM_", "CUDA_", "NCCL_", "NVIDIA_", "TORCH", "PYTORCH_", "TRITON_",
                    "OMP_", "MKL_", "KMP_", "OPENBLAS_", "HF_", "TRANSFORMERS_", "TOKENIZERS_")
# Names under those prefixes that still load code: a shared library, a plugin or a module
# from a path (CUDA's injection, NCCL's net/tuner/profiler/env plugins, OpenMP tools), a
# binary Triton runs, or a logging config whose entries instantiate classes.
CODE_LOADING_ENV = ("VLLM_PLUGINS", "CUDA_INJECTION32_PATH", "CUDA_INJECTION64_PATH",
                    "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN",
                    "NCCL_ENV_PLUGIN", "OMP_TOOL", "OMP_TOOL_LIBRARIES",
                    "VLLM_LOGGING_CONFIG_PATH", "TORCH_EXTENSIONS_DIR")
# The same by shape, for names not listed yet: a path, a plugin, a library, an injection.
CODE_LOADING_NAME = re.compile(r"PATH|PLUGIN|LIBRAR|INJECTION|_LIB$|_BINARY|_EXECUTABLE")
# vLLM flags whose value is code to import or run (a class path, a module, remote code).
CODE_LOADING_ARGS = ("--trust-remote-code", "--worker-cls", "--worker-extension-cls",
                     "--logits-processors", "--middleware", "--tool-parser-plugin",
                     "--reasoning-parser-plugin", "--scheduler-cls", "--io-processor-plugin",
                     "--kv-transfer-config", "--ec-transfer-config",
                     "--distributed-executor-backend", "--log-config-file")


@dataclass(frozen=True)
class EngineTrust:
    """This worker's allow-list of engine programs, or trust in whatever is stored."""

    allowed: tuple[tuple[str, ...], ...]
    trust_stored: bool = False
    engine_python: str | None = None

    @classmethod
    def from_settings(cls, engine_python: str | None = None,
                      trust_stored: bool = False) -> "EngineTrust":
        text = settings().allowed_engines
        python = engine_python or settings().engine_python
        entries = [shlex.split(e) for e in text.split(";") if e.strip()] if text else []
        if engine_python or not entries:
            entries.append([python])
        return cls(tuple(_expand(e) for e in entries), trust_stored, engine_python)

    def argv(self) -> list[str]:
        """The `tuner worker` flags that give a worker this trust (TUNER_ALLOWED_ENGINES
        reaches it through the environment)."""
        return ((["--engine-python", self.engine_python] if self.engine_python else []) +
                (["--trust-stored-engine"] if self.trust_stored else []))

    def check(self, spec: StudySpec) -> None:
        """``UsageError`` (one line) when the stored study asks for something not allowed:
        a program off the allow-list (vLLM only; the simulator's is tuner's own), or, for
        every engine kind, ``engine.env`` or ``engine.extra_args`` that can load code."""
        if self.trust_stored:
            return
        if spec.engine.kind != "sim":
            self._check_program(spec)
        bad_env = [k for k in spec.engine.env if not env_is_setting(k)]
        bad_args = [a for a in spec.engine.extra_args if a.split("=")[0] in CODE_LOADING_ARGS]
        if bad_env or bad_args:
            what = ", ".join([f"engine.env {k}" for k in bad_env] +
                             [f"engine.extra_args {a}" for a in bad_args])
            raise UsageError(f"study {spec.name} sets {what}, which can load code; a worker "
                             "runs it only with --trust-stored-engine")

    def _check_program(self, spec: StudySpec) -> None:
        words = _normal(program(spec))
        # the cross-check runs `engine.python -m vllm... bench serve`, whatever the command
        bench = _expand([spec.engine.python])
        if spec.engine.crosscheck_trials and words in self.allowed and bench not in self.allowed:
            raise UsageError(
                f"study {spec.name} cross-checks with engine.python {spec.engine.python}, "
                "which this worker does not allow; give --engine-python, list it in "
                "TUNER_ALLOWED_ENGINES, or set engine.crosscheck_trials = 0")
        if words not in self.allowed:
            shown = "; ".join(shlex.join(a) for a in self.allowed)
            raise UsageError(
                f"study {spec.name} runs `{shlex.join(words)}`, which this worker does not "
                f"allow (allowed: {shown}); give --engine-python, list it in "
                "TUNER_ALLOWED_ENGINES, or trust the database with --trust-stored-engine")


def env_is_setting(name: str) -> bool:
    """Whether a stored study may set environment variable ``name`` without trust: an engine
    library's setting (``SETTING_PREFIXES``) that names no code to load."""
    return (name.startswith(SETTING_PREFIXES) and name not in CODE_LOADING_ENV
            and not CODE_LOADING_NAME.search(name))


def _expand(entry: list[str]) -> tuple[str, ...]:
    return _normal(entry + ["-m", VLLM_MODULE] if len(entry) == 1 else entry)


def _normal(words: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """A program path as the worker would start it (relative to its folder); a bare name
    stays a name (looked up on PATH)."""
    if not words:
        return ()
    first = os.path.abspath(words[0]) if "/" in words[0] else words[0]
    return (first, *words[1:])
