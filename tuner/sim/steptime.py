"""How long one engine step takes on the GPU: a roofline plus fixed overheads (pure).

    compute = 2 x params x tokens (+ lm_head for each sampled token) + attention
              (4 x layers x heads x head_dim x context, per token), split over tp ranks
    memory  = weights read once + KV read for every token's context + KV written
    gpu     = max(compute / (peak x efficiency), memory / (bandwidth x efficiency))
              + all-reduce (2 per layer with tp > 1)
    time    = gpu + kernel launches + per-step and per-sequence CPU time

Kernel launches, by how the step runs (vLLM 0.24's default CUDA-graph mode is
FULL_AND_PIECEWISE):
  - decode-only steps up to the capture size: one full CUDA graph (``graph_launch``);
  - steps that carry prefill tokens, up to the capture size: piecewise graphs, attention run
    between them (``piecewise_launch``);
  - steps above the capture size of a compiled model: torch.compile's kernels without a
    graph (``compiled_launch``);
  - ``--enforce-eager``: every kernel dispatched from Python; the GPU runs behind the
    dispatching CPU, so a step costs the longer of the two, ``max(gpu, eager launch)``,
    not their sum (the measurements that show it: results/h200/simulator-error.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.sim.config import EngineConfig, weight_dtype_bytes
from tuner.sim.profiles import EngineConstants, GpuProfile
from tuner.sim.shape import ModelShape


@dataclass(frozen=True)
class StepCoefficients:
    """Per-configuration constants, computed once so a step costs a few multiplications."""

    flops_per_token: float  # linear layers, per rank
    flops_per_logit: float  # lm_head, per sampled token, per rank
    attn_flops_per_ctx: float  # per token and context position, per rank
    weight_bytes: float  # per rank
    kv_bytes_per_token: float  # per rank
    flops_per_s: float
    bytes_per_s: float
    allreduce_s_per_token: float
    allreduce_fixed_s: float
    overhead_s: float
    per_seq_s: float
    launch_graph_s: float  # a full graph (decode-only steps), or eager dispatch when eager
    launch_piecewise_s: float  # piecewise graphs (steps with prefill tokens)
    launch_eager_s: float  # above the capture size: compiled kernels, or eager dispatch
    capture_size: int
    eager: bool  # launches overlap the GPU's work (the step costs their max)


def coefficients(cfg: EngineConfig, shape: ModelShape, gpu: GpuProfile,
                 k: EngineConstants) -> StepCoefficients:
    tp = cfg.tensor_parallel_size
    layers = shape.num_hidden_layers
    act_bytes = weight_dtype_bytes(cfg, shape)
    ar_fixed = ar_per_token = 0.0
    if tp > 1:
        link = gpu.interconnect_gbps * 1e9
        ar_fixed = 2 * layers * k.allreduce_latency_us * 1e-6
        ar_per_token = 2 * layers * shape.hidden_size * act_bytes * 2 * (tp - 1) / tp / link
    eager = cfg.enforce_eager
    return StepCoefficients(
        flops_per_token=2.0 * layers * shape.layer_params() / tp,
        flops_per_logit=2.0 * shape.hidden_size * shape.vocab_size / tp,
        attn_flops_per_ctx=4.0 * layers * shape.q_size / tp,
        weight_bytes=shape.weight_bytes(tp, act_bytes),
        kv_bytes_per_token=shape.kv_bytes_per_token(tp, cfg.kv_cache_dtype),
        flops_per_s=gpu.bf16_tflops * 1e12 * k.compute_efficiency,
        bytes_per_s=gpu.memory_bandwidth_gbps * 1e9 * k.bandwidth_efficiency,
        allreduce_s_per_token=ar_per_token,
        allreduce_fixed_s=ar_fixed,
        overhead_s=k.step_overhead_ms * 1e-3,
        per_seq_s=k.per_sequence_overhead_us * 1e-6,
        launch_graph_s=layers * (k.eager_launch_us_per_layer if eager
                                 else k.graph_launch_us_per_layer) * 1e-6,
        launch_piecewise_s=layers * (k.eager_launch_us_per_layer if eager
                                     else k.piecewise_launch_us_per_layer) * 1e-6,
        launch_eager_s=layers * (k.eager_launch_us_per_layer if eager
                                 else k.compiled_launch_us_per_layer) * 1e-6,
        capture_size=0 if eager else min(k.max_cudagraph_capture_size, 2 * cfg.max_num_seqs),
        eager=eager,
    )


def step_seconds(c: StepCoefficients, num_tokens: int, num_seqs: int, num_logits: int,
                 attn_ctx: float, kv_read_tokens: float) -> float:
    """Duration of one step.

    ``attn_ctx``: sum over scheduled tokens of the context each attends to;
    ``kv_read_tokens``: sum over scheduled requests of the tokens of KV read. A step with
    more tokens than sequences carries prefill tokens (a decode is one token).
    """
    if num_tokens <= 0:
        return 0.0
    gpu, launch = _gpu_and_launch(c, num_tokens, num_seqs, num_logits, attn_ctx, kv_read_tokens)
    busy = max(gpu, launch) if c.eager else gpu + launch
    return busy + c.overhead_s + c.per_seq_s * num_seqs


def launch_bound(c: StepCoefficients, num_tokens: int, num_seqs: int, num_logits: int,
                 attn_ctx: float, kv_read_tokens: float) -> bool:
    """Whether the GPU waits on the CPU's eager dispatch in this step (eager only)."""
    if not c.eager or num_tokens <= 0:
        return False
    gpu, launch = _gpu_and_launch(c, num_tokens, num_seqs, num_logits, attn_ctx, kv_read_tokens)
    return launch >= gpu


def _gpu_and_launch(c: StepCoefficients, num_tokens: int, num_seqs: int, num_logits: int,
                    attn_ctx: float, kv_read_tokens: float) -> tuple[float, float]:
    flops = c.flops_per_token * num_tokens + c.flops_per_logit * num_logits \
        + c.attn_flops_per_ctx * attn_ctx
    moved = c.weight_bytes + c.kv_bytes_per_token * (kv_read_tokens + num_tokens)
    gpu = max(flops / c.flops_per_s, moved / c.bytes_per_s)
    if c.allreduce_fixed_s:
        gpu += c.allreduce_fixed_s + c.allreduce_s_per_token * num_tokens
    if num_tokens > c.capture_size:
        launch = c.launch_eager_s
    elif num_tokens > num_seqs:
        launch = c.launch_piecewise_s
    else:
        launch = c.launch_graph_s
    return gpu, launch
