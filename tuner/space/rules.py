"""Rule sets: the constraints a configuration must meet before it may reach a GPU.

A rule set is data: a name, a description, and the rules it holds. Each rule is a pure
check over the effective flags plus the study's context (what the workload needs), and a
pure repair that moves a violating configuration to the nearest one that meets it.

Every rule set holds vLLM's own start checks; ``article`` (the default) adds the tuning
article's "no prefix caching together with chunked prefill"; ``vllm-v1`` lets the two
combine, as the V1 engine does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

Flags = Mapping[str, Any]


@dataclass(frozen=True)
class Context:
    """What the rules need to know beyond the flags.

    ``min_model_len``: the workload's longest input + output; ``model_max_len``: the
    model's context; ``num_attention_heads``: tensor parallelism must divide it.
    """

    min_model_len: int
    model_max_len: int
    num_attention_heads: int = 0


@dataclass(frozen=True)
class Rule:
    id: str
    text: str
    violated: Callable[[Flags, Context], bool]
    repair: Callable[[dict, Context], None]


def _budget_below_seqs(f: Flags, c: Context) -> bool:
    return f["max_num_batched_tokens"] < f["max_num_seqs"]


def _repair_budget_below_seqs(f: dict, c: Context) -> None:
    f["max_num_seqs"] = f["max_num_batched_tokens"]


def _model_len_short(f: Flags, c: Context) -> bool:
    return f["max_model_len"] < c.min_model_len


def _repair_model_len_short(f: dict, c: Context) -> None:
    f["max_model_len"] = c.min_model_len


def _model_len_long(f: Flags, c: Context) -> bool:
    return f["max_model_len"] > c.model_max_len


def _repair_model_len_long(f: dict, c: Context) -> None:
    f["max_model_len"] = c.model_max_len


def _budget_below_model_len(f: Flags, c: Context) -> bool:
    return not f["enable_chunked_prefill"] and f["max_num_batched_tokens"] < f["max_model_len"]


def _repair_budget_below_model_len(f: dict, c: Context) -> None:
    f["max_num_batched_tokens"] = f["max_model_len"]


def _prefix_with_chunked(f: Flags, c: Context) -> bool:
    return bool(f["enable_chunked_prefill"] and f["enable_prefix_caching"])


def _repair_prefix_with_chunked(f: dict, c: Context) -> None:
    f["enable_prefix_caching"] = False


def _tp_not_dividing(f: Flags, c: Context) -> bool:
    heads = c.num_attention_heads
    return bool(heads) and heads % int(f.get("tensor_parallel_size", 1)) != 0


def _repair_tp_not_dividing(f: dict, c: Context) -> None:
    tp = int(f.get("tensor_parallel_size", 1))
    while tp > 1 and c.num_attention_heads % tp:
        tp //= 2
    f["tensor_parallel_size"] = tp


def _partial_without_chunked(f: Flags, c: Context) -> bool:
    return int(f.get("max_num_partial_prefills", 1)) > 1 and not f["enable_chunked_prefill"]


def _repair_partial_without_chunked(f: dict, c: Context) -> None:
    f["max_num_partial_prefills"] = 1


def _long_partials_above_partials(f: Flags, c: Context) -> bool:
    return int(f.get("max_long_partial_prefills", 1)) > int(f.get("max_num_partial_prefills", 1))


def _repair_long_partials_above_partials(f: dict, c: Context) -> None:
    f["max_long_partial_prefills"] = int(f.get("max_num_partial_prefills", 1))


# vLLM 0.24's SchedulerConfig checks of the partial-prefill flags (config/scheduler.py); they
# hold trivially where a study does not tune those flags.
PARTIAL_PREFILL_CHECKS: tuple[Rule, ...] = (
    Rule("partial-prefills-need-chunked",
         "max_num_partial_prefills > 1 needs chunked prefill",
         _partial_without_chunked, _repair_partial_without_chunked),
    Rule("long-partials-within-partials",
         "max_long_partial_prefills <= max_num_partial_prefills",
         _long_partials_above_partials, _repair_long_partials_above_partials),
)

VLLM_START_CHECKS: tuple[Rule, ...] = (
    Rule("model-len-covers-workload",
         "max_model_len >= the workload's longest input + output",
         _model_len_short, _repair_model_len_short),
    Rule("model-len-within-context", "max_model_len <= the model's context length",
         _model_len_long, _repair_model_len_long),
    Rule("budget-covers-model-len",
         "without chunked prefill, max_num_batched_tokens >= max_model_len",
         _budget_below_model_len, _repair_budget_below_model_len),
    Rule("budget-covers-seqs", "max_num_batched_tokens >= max_num_seqs",
         _budget_below_seqs, _repair_budget_below_seqs),
    Rule("tp-divides-heads", "tensor_parallel_size divides the attention heads",
         _tp_not_dividing, _repair_tp_not_dividing),
    *PARTIAL_PREFILL_CHECKS,
)

NO_PREFIX_WITH_CHUNKED = Rule(
    "no-prefix-caching-with-chunked-prefill",
    "prefix caching is not used together with chunked prefill (the article)",
    _prefix_with_chunked, _repair_prefix_with_chunked)


@dataclass(frozen=True)
class RuleSet:
    name: str
    description: str
    rules: tuple[Rule, ...]

    def violations(self, flags: Flags, ctx: Context) -> list[Rule]:
        """The rules ``flags`` break, in order; empty when the configuration is valid."""
        return [r for r in self.rules if r.violated(flags, ctx)]


RULE_SETS: dict[str, RuleSet] = {
    "article": RuleSet(
        "article",
        "the tuning article's rules: vLLM's start checks, and no prefix caching with "
        "chunked prefill",
        (NO_PREFIX_WITH_CHUNKED, *VLLM_START_CHECKS)),
    "vllm-v1": RuleSet(
        "vllm-v1",
        "vLLM V1: its start checks only; chunked prefill and prefix caching combine",
        VLLM_START_CHECKS),
}

DEFAULT_RULE_SET = "article"


def rule_set(name: str) -> RuleSet:
    try:
        return RULE_SETS[name]
    except KeyError:
        raise KeyError(f"unknown rule set {name!r}; choose one of: "
                       f"{', '.join(RULE_SETS)}") from None
