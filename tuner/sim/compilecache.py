"""The simulated compile cache: one marker file per compile key, where vLLM keeps its
compiled artefacts (``$VLLM_CACHE_ROOT/torch_compile_cache/<hash>``).

A start whose key has a marker is a hit; a start that succeeds leaves its marker, so the
next start of the same key on the same cache hits, as vLLM's does. Without
``VLLM_CACHE_ROOT`` there is no cache (vLLM would use ``~/.cache/vllm``; the simulator
keeps nothing outside the folders it is given) and every compiled start misses.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping


def marker(env: Mapping[str, str], digest: str) -> Path | None:
    """The marker of the key named ``digest`` under ``env``'s ``VLLM_CACHE_ROOT``, or None
    when it is unset or empty."""
    root = env.get("VLLM_CACHE_ROOT")
    return Path(root) / "torch_compile_cache" / digest if root else None


def seen(path: Path | None) -> bool:
    """Whether a start of this key succeeded on this cache before."""
    return path is not None and path.exists()


def remember(path: Path | None, key: Mapping[str, Any]) -> None:
    """Leave the marker (the key's fields, for a reader), atomically; nothing without a
    cache."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(key, sort_keys=True))
    os.replace(tmp, path)
