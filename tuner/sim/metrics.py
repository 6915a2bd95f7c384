"""vLLM's Prometheus metrics of the simulated engine, as exposition text (pure)."""

from __future__ import annotations

from tuner.sim.core import EngineCore


def _line(name: str, kind: str, help_: str, value: float, labels: str) -> str:
    return f"# HELP {name} {help_}\n# TYPE {name} {kind}\n{name}{{{labels}}} {value}\n"


def metrics_text(core: EngineCore, model_name: str, late_steps: int = 0) -> str:
    """The counters and gauges vLLM exports that the tuner reads, with vLLM's names."""
    pool = core.scheduler.pool
    labels = f'engine="0",model_name="{model_name}"'
    cfg = core.cfg
    parts = [
        _line("vllm:num_requests_running", "gauge",
              "Number of requests in model execution batches.", core.num_running, labels),
        _line("vllm:num_requests_waiting", "gauge",
              "Number of requests waiting to be processed.", core.num_waiting, labels),
        _line("vllm:kv_cache_usage_perc", "gauge",
              "KV-cache usage. 1 means 100 percent usage.", core.kv_usage, labels),
        _line("vllm:num_preemptions_total", "counter",
              "Cumulative number of preemption from the engine.", core.preemptions, labels),
        _line("vllm:prefix_cache_queries_total", "counter",
              "Prefix cache queries, in terms of number of queried tokens.", pool.queries, labels),
        _line("vllm:prefix_cache_hits_total", "counter",
              "Prefix cache hits, in terms of number of cached tokens.", pool.hits, labels),
        _line("vllm:prompt_tokens_total", "counter",
              "Number of prefill tokens processed.", core.prompt_tokens, labels),
        _line("vllm:generation_tokens_total", "counter",
              "Number of generation tokens processed.", core.generation_tokens, labels),
        _line("vllm:request_success_total", "counter",
              "Count of successfully processed requests.", core.finished,
              labels + ',finished_reason="length"'),
        _line("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig", 1.0,
              f'block_size="{cfg.block_size}",cache_dtype="{cfg.kv_cache_dtype}",'
              f'enable_prefix_caching="{cfg.enable_prefix_caching}",engine="0",'
              f'gpu_memory_utilization="{cfg.gpu_memory_utilization}",'
              f'num_gpu_blocks="{core.plan.num_blocks}"'),
        _line("tuner_sim:busy_seconds_total", "counter",
              "Simulated seconds the engine spent in steps (tuner's simulator only).",
              core.busy_s, labels),
        _line("tuner_sim:steps_total", "counter", "Engine steps run (tuner's simulator only).",
              core.steps, labels),
        _line("tuner_sim:late_steps_total", "counter",
              "Steps whose tokens left more than 2 ms after their modelled time: the host "
              "could not keep real time (tuner's simulator only).", late_steps, labels),
    ]
    return "".join(parts)
