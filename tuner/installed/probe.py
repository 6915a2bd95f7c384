"""Ask the study's engine which flags it has (a subprocess of the study's own python), and
cache the answer per engine version in the study's folder. The only I/O of this package.

For ``engine.kind = "vllm"`` the study's python runs ``PROBE``: it prints vLLM's version
(from its package metadata, without importing vllm), the batch defaults of vLLM's own
``EngineArgs.get_batch_defaults`` on the device it sees, then ``vllm serve --help=all``.
The version is asked first on its own (``VERSION_PROBE``, a fraction of a second): when a
cached answer for that version exists, the slow part is skipped. For ``kind = "sim"`` the
simulator answers the same question as its own process (``ask_sim``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

from tuner.installed.answer import Installed
from tuner.installed.helptext import MARKER, HelpParseError, parse_answer

VERSION_PROBE = "import importlib.metadata as m; print(m.version('vllm'))"

# sys.argv is set before vllm is imported: vLLM reads its config docstrings (the help text
# and the "(default: X)" of most flags) only when "--help" is on the command line then.
PROBE = f"""
import importlib.metadata, runpy, sys
world_size = int(sys.argv[1])
sys.argv = ["vllm", "serve", "--help=all"]
print({MARKER!r} + "engine vllm " + importlib.metadata.version("vllm"), flush=True)
try:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms import current_platform
    from vllm.usage.usage_lib import UsageContext
    tokens, seqs = EngineArgs.get_batch_defaults(world_size)
    api = UsageContext.OPENAI_API_SERVER
    if current_platform.is_cpu():
        device = "cpu"
    else:
        gib = current_platform.get_device_total_memory() / 2**30
        device = "%s %.1f GiB" % (current_platform.get_device_name(), gib)
    print({MARKER!r} + "batch %d %d %s" % (tokens[api], seqs[api], device), flush=True)
except Exception as e:
    print({MARKER!r} + "batch-unknown " + repr(e)[:200], flush=True)
runpy.run_module("vllm.entrypoints.cli.main", run_name="__main__")
"""


class ProbeError(Exception):
    """The engine could not be asked (no such python, no vLLM there, an unreadable answer)."""


def _run(argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, **env}, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ProbeError(f"no python at {argv[0]}") from None
    except OSError as e:  # not executable, a link loop...
        raise ProbeError(f"cannot run {argv[0]}: {e.strerror or e}") from None
    except subprocess.TimeoutExpired:
        raise ProbeError(f"{argv[0]} did not answer within {timeout_s:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ProbeError(f"{argv[0]} exited with code {done.returncode}: {last[:200]}")
    return done.stdout


def vllm_version(python: str, env: Mapping[str, str] | None = None,
                 timeout_s: float = 60) -> str:
    """The vLLM version installed for ``python`` (its package metadata)."""
    return _run([python, "-c", VERSION_PROBE], env or {}, timeout_s).strip()


def ask_vllm(python: str, env: Mapping[str, str] | None = None, world_size: int = 1,
             timeout_s: float = 300) -> Installed:
    """Run ``PROBE`` in ``python`` and parse its answer."""
    out = _run([python, "-c", PROBE, str(world_size)], env or {}, timeout_s)
    try:
        return parse_answer(out)
    except HelpParseError as e:
        raise ProbeError(f"{python}: {e}") from e


def ask_sim(gpu: str, timeout_s: float = 60) -> Installed:
    """What the simulator answers for ``gpu``: ``python -m tuner.sim serve --help=all``, run
    as vLLM's probe is run (a process, never an import of the simulator)."""
    argv = [sys.executable, "-m", "tuner.sim", "serve", "--gpu", gpu, "--help=all"]
    out = _run(argv, {}, timeout_s)
    try:
        return parse_answer(out)
    except HelpParseError as e:
        raise ProbeError(f"tuner sim: {e}") from e


def cache_file(cache_dir: Path, engine: str, version: str) -> Path:
    return cache_dir / f"{engine}-{version.replace('/', '_')}.json"


def cached_vllm(python: str, cache_dir: Path | None, env: Mapping[str, str] | None = None,
                world_size: int = 1, gpus: Sequence[int] = ()) -> Installed:
    """``ask_vllm`` through the per-version cache in ``cache_dir`` (None: no cache).

    ``gpus`` are made visible to the probe so that its batch defaults are those of the
    worker's device."""
    env = dict(env or {})
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
    path = None
    if cache_dir is not None:
        path = cache_file(cache_dir, "vllm", vllm_version(python, env))
        if path.is_file():
            try:
                return Installed.from_json(json.loads(path.read_text()))
            except (ValueError, KeyError, TypeError):
                pass  # a damaged cache file is asked again
    installed = ask_vllm(python, env, world_size)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(installed.to_json(), indent=1, sort_keys=True))
        tmp.replace(path)
    return installed

