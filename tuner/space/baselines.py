"""Baselines: vLLM's default flags and the tuning article's two example launches.

A new study enqueues them first so that every study shows its gain over the default.
They are references: launched exactly as given (outside the rule set). ``launch`` holds
the flags put on the command line; ``flags`` is the effective configuration (vLLM's
defaults for the rest, as vLLM derives them from the given ones: ``resolve_launch``), which
is what the trial records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tuner.space.defaults import resolve_launch
from tuner.space.space import SearchSpace


@dataclass(frozen=True)
class Baseline:
    name: str
    description: str
    launch: Mapping[str, Any]
    flags: Mapping[str, Any]


def fitted_model_len(space: SearchSpace) -> int:
    """The article's max-model-len fitted to the study: the fixed value if the study fixes
    one, else the smallest power of two covering the workload, within the model's context."""
    if "max_model_len" in space.fixed:
        return int(space.fixed["max_model_len"])
    need = space.context.min_model_len
    fitted = 1 << max(need - 1, 1).bit_length()
    return max(need, min(fitted, space.context.model_max_len))


def baselines(space: SearchSpace) -> list[Baseline]:
    """The default configuration (under the study's fixed settings) and the article's two."""
    defaults = {k: space.defaults[k] for k in space.names}
    length = fitted_model_len(space)
    article = {"gpu_memory_utilization": 0.95, "enforce_eager": True, "max_model_len": length}
    plain = {**article, "max_num_batched_tokens": 2 * length, "enable_prefix_caching": True,
             "enable_chunked_prefill": False}
    chunked = {**article, "max_num_batched_tokens": 256, "enable_prefix_caching": False,
               "enable_chunked_prefill": True}
    out = [Baseline("default", "vLLM's defaults (with the study's fixed flags)",
                    dict(space.fixed), {**defaults, **space.fixed})]
    for name, text, launch in (
            ("article", "the article's launch without chunked prefill", plain),
            ("article-chunked", "the article's launch with chunked prefill", chunked)):
        launch = {**space.fixed, **launch}
        out.append(Baseline(name, text, launch, resolve_launch(launch, defaults)))
    return out
