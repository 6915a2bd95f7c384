"""A trial's configuration as something to run: a `vllm serve` line, a `--config` YAML
file, or a JSON document for scripts (pure).

Every tuned flag is written out explicitly (booleans too), so the line means the same on
a vLLM whose defaults have moved. The benchmark-only ``engine.extra_args`` (such as
``--load-format dummy``) are left out: this is the line to serve the model with.

vLLM's ``--config`` (``FlexibleArgumentParser.load_config_file``) turns each key into
``--key value``; ``true`` into ``--key`` and ``false`` into ``--no-key``, so keys are the
long option names without the leading dashes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from tuner.space import flags_argv
from tuner.spec.study import StudySpec
from tuner.trials import TrialRecord


def _model_args(spec: StudySpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.model.served_name:
        out["served-model-name"] = spec.model.served_name
    out["dtype"] = spec.model.dtype
    return out


def serve_argv(spec: StudySpec, flags: Mapping[str, Any]) -> list[str]:
    """['vllm', 'serve', MODEL, '--served-model-name', ..., '--dtype', ..., flags...]."""
    argv = ["vllm", "serve", spec.model.path]
    for key, value in _model_args(spec).items():
        argv += [f"--{key}", str(value)]
    return argv + flags_argv(flags)


def config_dict(spec: StudySpec, flags: Mapping[str, Any]) -> dict[str, Any]:
    """The `vllm serve --config` mapping: model, served name, dtype, every tuned flag."""
    out: dict[str, Any] = {"model": spec.model.path, **_model_args(spec)}
    for name in sorted(flags):
        out[name.replace("_", "-")] = flags[name]
    return out


def config_yaml(spec: StudySpec, flags: Mapping[str, Any], comments: list[str]) -> str:
    """The YAML text, with ``comments`` as leading # lines."""
    head = "".join(f"# {line}\n" for line in comments)
    return head + yaml.safe_dump(config_dict(spec, flags), sort_keys=False,
                                 default_flow_style=False)


def trial_document(spec: StudySpec, r: TrialRecord, changed: Mapping[str, Any],
                   gains: Mapping[str, float | None]) -> dict[str, Any]:
    """Everything a script needs about one trial, JSON-safe."""
    return {
        "study": spec.name,
        "trial": r.number,
        "baseline": r.baseline,
        "flags": dict(r.flags),
        "changed_flags": dict(changed),
        "metrics": dict(r.metrics),
        "command": serve_argv(spec, r.flags),
        "config": config_dict(spec, r.flags),
        "measured_command": list(r.command),
        "gain_over_default_pct": dict(gains),
        "vllm_version": r.vllm_version,
        "gpu_name": r.gpu_name,
        "kv_cache_tokens": r.kv_cache_tokens,
        # False when the load generator, not the server, was the bottleneck of the run.
        "measurement_valid": r.client_valid,
    }
