"""The accuracy guard's rules (pure): which trial records the reference, which replays it,
what a replay's figures say, and the caveat that goes with them.

A study that opts in to a lossy flag value (``[space] lossy``) is guarded: its default
baseline records the reference once per study (greedy completions of ``prompt_set``), and
every trial whose flags hold a lossy value replays the same prompts on its own server, after
its benchmark. The figures (``tuner.accuracy.figures``) and the verdict against the study's
limit (``StudySpec.accuracy_limit``) go into the trial's ``accuracy`` attribute; the limit is
told to the sampler as the constraint ``accuracy:token_agreement`` (``tuner.trials.record``).
Lossless trials are not replayed: their class, not a measurement, says they keep the model's
outputs. The I/O (requests, the study's reference) is ``tuner.runner.guard``.
"""

from __future__ import annotations

from typing import Any, Mapping

from tuner.accuracy.figures import Completion, Figures
from tuner.numerics import lossy_flags
from tuner.spec.study import StudySpec

REFERENCE, REPLAY = "reference", "replay"
DEFAULT_BASELINE = "default"
DUMMY = ("dummy weights (--load-format dummy): these figures say nothing about the "
         "model's quality, only that the guard ran")
SIMULATED = ("simulated engine: its divergence is a model (tuner/sim/greedy.py); these "
             "figures say nothing about the model's quality")


def role(spec: StudySpec, flags: Mapping[str, Any], baseline: str | None) -> str | None:
    """``reference`` (the default baseline of a guarded study), ``replay`` (a trial with a
    lossy value) or None (nothing to check)."""
    if spec.accuracy_limit is None:
        return None
    if baseline == DEFAULT_BASELINE:
        return REFERENCE
    return REPLAY if lossy_flags(flags) else None


def caveat(spec: StudySpec) -> str | None:
    """What the figures cannot say on this engine (None: real weights on vLLM)."""
    if spec.engine.kind == "sim":
        return SIMULATED
    words = list(spec.engine.extra_args) + list(spec.engine.command)
    if any(w == "dummy" and i and words[i - 1] == "--load-format" for i, w in enumerate(words)) \
            or "--load-format=dummy" in words:
        return DUMMY
    return None


def reference_attrs(spec: StudySpec, trial: int) -> dict[str, Any]:
    """The reference trial's ``accuracy`` attribute."""
    out = {"role": REFERENCE, "prompts": spec.accuracy.prompts,
           "max_tokens": spec.accuracy.max_tokens, "reference_trial": trial}
    return _with_caveat(out, spec)


def replay_attrs(spec: StudySpec, flags: Mapping[str, Any], figures: Figures,
                 reference_trial: int) -> dict[str, Any]:
    """A replayed trial's ``accuracy`` attribute: figures, limit and verdict."""
    limit = spec.accuracy_limit
    out = {"role": REPLAY, "lossy": lossy_flags(flags), "reference_trial": reference_trial,
           "token_agreement": round(figures.token_agreement, 6),
           "logprob_diff": None if figures.logprob_diff is None
           else round(figures.logprob_diff, 6),
           "prompts": figures.prompts, "diverged": figures.diverged,
           "agreed_tokens": figures.agreed_tokens, "tokens": figures.tokens,
           "min_token_agreement": limit,
           "passed": limit is None or figures.token_agreement >= limit}
    return _with_caveat(out, spec)


def unchecked_attrs(spec: StudySpec, flags: Mapping[str, Any], why: str) -> dict[str, Any]:
    """A lossy trial the guard could not check (no reference yet, the server failed): it
    fails the limit, since nothing shows that it keeps the model's outputs."""
    return _with_caveat({"role": REPLAY, "lossy": lossy_flags(flags), "error": why,
                         "min_token_agreement": spec.accuracy_limit, "passed": False}, spec)


def _with_caveat(out: dict[str, Any], spec: StudySpec) -> dict[str, Any]:
    note = caveat(spec)
    return {**out, "caveat": note} if note else out


def reference_payload(trial: int, prompts: tuple[str, ...], max_tokens: int,
                      completions: list[Completion]) -> dict[str, Any]:
    """The study's stored reference (JSON-safe)."""
    return {"trial": trial, "prompts": list(prompts), "max_tokens": max_tokens,
            "completions": [{"tokens": list(c.tokens), "logprobs": list(c.logprobs)}
                            for c in completions]}


def reference_completions(payload: Mapping[str, Any]) -> list[Completion]:
    return [Completion(tuple(c["tokens"]), tuple(c["logprobs"]))
            for c in payload["completions"]]
