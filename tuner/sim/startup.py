"""The start checks vLLM makes, in its order, with its wording (pure); and its startup log.

A refused start is a ``StartFailure`` (its ``kind`` for the search, its ``message`` as vLLM
prints it on stderr before exiting with code 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.sim.config import EngineConfig
from tuner.sim.memory import MemoryPlan, plan_memory
from tuner.sim.profiles import GIB, MIB, EngineConstants, GpuProfile
from tuner.sim.shape import ModelShape
from tuner.sim.starts import StartPhases


@dataclass(frozen=True)
class StartFailure:
    """Why the engine refused to start: kind is invalid_config, oom_weights, no_kv_memory,
    kv_too_small or oom_cudagraph."""

    kind: str
    message: str


def _validation(message: str, cls: str = "SchedulerConfig") -> str:
    return (f"pydantic_core._pydantic_core.ValidationError: 1 validation error for {cls}\n"
            f"  Value error, {message} [type=value_error]")


def config_errors(cfg: EngineConfig, shape: ModelShape) -> StartFailure | None:
    """Argument checks made before anything is loaded."""
    b, seqs, mml = cfg.max_num_batched_tokens, cfg.max_num_seqs, cfg.max_model_len
    if not 0 < cfg.gpu_memory_utilization <= 1:
        return StartFailure("invalid_config", _validation(
            f"GPU memory utilization must be within (0, 1]. Got {cfg.gpu_memory_utilization}.",
            "CacheConfig"))
    if mml > shape.max_position_embeddings:
        return StartFailure("invalid_config", _validation(
            f"User-specified max_model_len ({mml}) is greater than the derived max_model_len "
            f"(max_position_embeddings={shape.max_position_embeddings} or model_max_length=None "
            "in model's config.json). To allow overriding this maximum, set the env var "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.", "ModelConfig"))
    if b < mml and not cfg.enable_chunked_prefill:
        return StartFailure("invalid_config", _validation(
            f"max_num_batched_tokens ({b}) is smaller than max_model_len ({mml}). This "
            "effectively limits the maximum sequence length to max_num_batched_tokens and "
            "makes vLLM reject longer sequences. Please increase max_num_batched_tokens or "
            "decrease max_model_len."))
    if b < seqs:
        return StartFailure("invalid_config", _validation(
            f"max_num_batched_tokens ({b}) must be greater than or equal to max_num_seqs ({seqs})."))
    partial = partial_prefill_errors(cfg)
    if partial:
        return StartFailure("invalid_config", _validation(partial))
    tp = cfg.tensor_parallel_size
    if tp < 1 or shape.num_attention_heads % tp:
        return StartFailure("invalid_config", (
            f"ValueError: Total number of attention heads ({shape.num_attention_heads}) must be "
            f"divisible by tensor parallel size ({tp})."))
    return None


def partial_prefill_errors(cfg: EngineConfig) -> str | None:
    """vLLM 0.24's SchedulerConfig checks of the partial-prefill flags, in its wording."""
    if cfg.max_num_partial_prefills > 1:
        if not cfg.enable_chunked_prefill:
            return "Chunked prefill must be enabled to set max_num_partial_prefills > 1."
        if cfg.long_prefill_token_threshold > cfg.max_model_len:
            return (f"long_prefill_token_threshold ({cfg.long_prefill_token_threshold}) "
                    f"cannot be greater than the max_model_len ({cfg.max_model_len}).")
    if cfg.max_long_partial_prefills > cfg.max_num_partial_prefills:
        return (f"self.max_long_partial_prefills={cfg.max_long_partial_prefills} must be less "
                f"than or equal to self.max_num_partial_prefills={cfg.max_num_partial_prefills}.")
    return None


def _oom(tried: int, total: int, in_use: int) -> str:
    free = max(0, total - in_use)
    return ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            f"{tried / MIB:.2f} MiB. GPU 0 has a total capacity of {total / GIB:.2f} GiB of which "
            f"{free / MIB:.2f} MiB is free. Including non-PyTorch memory, this process has "
            f"{in_use / GIB:.2f} GiB memory in use. If reserved but unallocated memory is large "
            "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")


def memory_errors(cfg: EngineConfig, shape: ModelShape, plan: MemoryPlan,
                  k: EngineConstants) -> StartFailure | None:
    """Load, profile and KV-cache checks, given the memory plan."""
    total = plan.total_bytes
    if plan.weight_bytes + plan.non_torch_bytes > total:
        layer = shape.layer_params() * shape.dtype_bytes // cfg.tensor_parallel_size
        return StartFailure("oom_weights", _oom(layer, total, total - layer // 2))
    if plan.kv_cache_bytes <= 0:
        return StartFailure("no_kv_memory", (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."))
    needed = plan.kv_bytes_per_token * cfg.max_model_len
    if plan.kv_cache_tokens < cfg.max_model_len:
        return StartFailure("kv_too_small", (
            "ValueError: To serve at least one request with the models's max seq len "
            f"({cfg.max_model_len}), ({needed / GIB:.2f} GiB KV cache is needed, which is larger "
            f"than the available KV cache memory ({plan.kv_cache_bytes / GIB:.2f} GiB). Based on "
            f"the available memory, the estimated maximum model length is "
            f"{plan.kv_cache_tokens}. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine."))
    used = plan.requested_bytes if not k.cudagraph_in_kv_budget else plan.requested_bytes - plan.cudagraph_bytes
    if plan.cudagraph_bytes and used + plan.cudagraph_bytes > total:
        return StartFailure("oom_cudagraph", _oom(plan.cudagraph_bytes, total, used))
    return None


def check_start(cfg: EngineConfig, shape: ModelShape, gpu: GpuProfile,
                k: EngineConstants) -> MemoryPlan | StartFailure:
    """The memory plan of a start that succeeds, or why vLLM would refuse it."""
    failure = config_errors(cfg, shape)
    if failure:
        return failure
    plan = plan_memory(cfg, shape, gpu, k)
    return memory_errors(cfg, shape, plan, k) or plan


@dataclass(frozen=True)
class LogLine:
    """One startup log line: when (simulated seconds from the spawn), which of vLLM's
    processes prints it (APIServer or EngineCore), and its text."""

    at_s: float
    process: str
    text: str


def startup_lines(cfg: EngineConfig, plan: MemoryPlan, start: StartPhases,
                  url: str) -> list[LogLine]:
    """vLLM 0.24's startup lines for a start that succeeds, in its wording, each at the
    simulated time the start model (``tuner.sim.starts``) puts it: the lines that
    ``tuner.engine.startlog.start_phases`` reads, and the memory lines."""
    t = start.process_start
    lines = [LogLine(t, "APIServer", "simulated vLLM engine (tuner.sim): timings come from a "
                                     "model, not a GPU"),
             LogLine(t, "APIServer", f"non-default args and resolved config: {cfg}")]
    t += start.api_start
    lines.append(LogLine(t, "EngineCore", "Initializing a V1 LLM engine (tuner.sim)"))
    t += start.engine_start
    lines.append(LogLine(t, "EngineCore", f"Model loading took {plan.weight_bytes / GIB:.4f} GiB "
                                          f"and {start.weights:.6f} seconds"))
    if start.compile is not None:
        t += start.compile
        span = f"compile range (1, {cfg.max_num_batched_tokens})"
        lines += [LogLine(t, "EngineCore", (
                      f"Directly load the compiled graph(s) for {span} from the cache, took "
                      f"{start.compile:.3f} s") if start.compile_cache == "hit" else
                      f"Compiling a graph for {span} takes {start.compile:.2f} s"),
                  LogLine(t, "EngineCore", f"torch.compile took {start.compile:.2f} s in total")]
    t += start.kv_profile
    lines += [LogLine(t, "EngineCore", text) for text in (
        f"Initial profiling/warmup run took {start.kv_profile:.2f} s",
        f"Available KV cache memory: {plan.kv_cache_bytes / GIB:.2f} GiB",
        f"GPU KV cache size: {plan.kv_cache_tokens:,} tokens",
        f"Maximum concurrency for {cfg.max_model_len:,} tokens per request: "
        f"{plan.kv_cache_tokens / cfg.max_model_len:.2f}x")]
    if start.graph_capture is not None:
        t += start.graph_capture
        lines.append(LogLine(t, "EngineCore", f"Graph capturing finished in "
                             f"{start.graph_capture:.0f} secs, took "
                             f"{plan.cudagraph_bytes / GIB:.2f} GiB"))
    t += start.warmup
    lines.append(LogLine(t, "EngineCore", "init engine (profile, create kv cache, warmup model) "
                                          f"took {start.init_engine:.2f} s"))
    t += start.api_ready
    lines.append(LogLine(t, "APIServer", f"Starting vLLM API server 0 on {url}"))
    return lines
