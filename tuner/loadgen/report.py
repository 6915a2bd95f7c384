"""The run's summary as a table laid out like vLLM's ``bench serve`` output (pure)."""

from __future__ import annotations

from tuner.loadgen import gaps
from tuner.loadgen.benchmark import BenchmarkResult

WIDTH = 50


def _row(label: str, value: object) -> str:
    if isinstance(value, float):
        return f"{label:<40} {value:<10.2f}"
    return f"{label:<40} {value!s:<10}"


def _title(text: str, fill: str = "-") -> str:
    return f"{text:{fill}^{WIDTH}}"


def format_summary(result: BenchmarkResult) -> str:
    """A table of the result; ``result.metrics`` keys as vLLM's."""
    m, load = result.metrics, result.config.get("load", {})
    lines = [_title(" Serving Benchmark Result ", "="),
             _row("Successful requests:", int(m["completed"])),
             _row("Failed requests:", int(m["failed"]))]
    if load.get("max_concurrency") is not None:
        lines.append(_row("Maximum request concurrency:", load["max_concurrency"]))
    rate = load.get("request_rate")
    if rate is not None and rate != float("inf"):
        lines.append(_row("Request rate configured (RPS):", float(rate)))
    lines += [_row("Benchmark duration (s):", m["duration"]),
              _row("Total input tokens:", int(m["total_input_tokens"])),
              _row("Total generated tokens:", int(m["total_output_tokens"])),
              _row("Request throughput (req/s):", m["request_throughput"])]
    if "slo_met" in m:
        lines.append(_row("Request goodput (req/s):", m["goodput"]))
    lines += [_row("Output token throughput (tok/s):", m["output_throughput"]),
              _row("Total token throughput (tok/s):", m["total_token_throughput"])]
    for key, name, header in (("ttft", "TTFT", "Time to First Token"),
                              ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
                              ("itl", "ITL", "Inter-token Latency"),
                              ("itl_per_token", "ITL/token", "Inter-token Latency per Token"),
                              ("e2el", "E2EL", "End-to-end Latency")):
        if f"mean_{key}_ms" not in m:
            continue
        lines.append(_title(header))
        unseen = gaps.first_unobservable([f"p99_{key}_ms"], result.unobservable)
        if unseen:  # a figure of 0 here would be read as a fast server
            lines.append(_row(f"{name}:", "NOT OBSERVED (see below)"))
            continue
        lines += [_row(f"Mean {name} (ms):", m[f"mean_{key}_ms"]),
                  _row(f"Median {name} (ms):", m[f"median_{key}_ms"]),
                  _row(f"P90 {name} (ms):", m[f"p90_{key}_ms"]),
                  _row(f"P99 {name} (ms):", m[f"p99_{key}_ms"])]
    lines += _sections(result)
    lines.append("=" * WIDTH)
    return "\n".join(lines)


def _sections(result: BenchmarkResult) -> list[str]:
    lines = []
    if result.failures:
        lines.append(_title("Failed requests by reason"))
        lines += [_row(f"{reason}:", n) for reason, n in sorted(result.failures.items())]
    lines.append(_title("Server (Prometheus /metrics)"))
    if not result.server:
        lines.append(_row("metrics:", "absent"))
    for key in ("preemptions", "prefix_cache_queries", "prefix_cache_hits"):
        if key in result.server:
            lines.append(_row(f"{key.replace('_', ' ').capitalize()}:", int(result.server[key])))
    if "kv_cache_usage_peak" in result.server:
        lines.append(_row("Peak KV-cache usage (%):", 100 * result.server["kv_cache_usage_peak"]))
    if "running_peak" in result.server:
        lines.append(_row("Peak running requests:", int(result.server["running_peak"])))
    m = result.metrics
    if "messages" in m:
        lines.append(_title("Stream"))
        lines += [_row("Token messages:", int(m["messages"])),
                  _row("Multi-token messages:", int(m["multi_token_messages"])),
                  _row("Zero gaps (coalesced reads):",
                       f"{int(m['zero_gaps'])} ({int(m['coalesced_reads'])})"),
                  _row("Gaps observed (%):", 100 * m["itl_gap_share"]),
                  _row("Message gaps observed (%):", 100 * m["token_gap_share"])]
        lines += [_row("Not observed:", why) for why in result.unobservable.values()]
    lines += _window(result)
    c = result.client
    lines.append(_title("Client"))
    lines += [_row("Send lag p99 (ms):", c.get("send_lag_p99_ms", 0.0)),
              _row("Event-loop lag p99 (ms):", c.get("loop_lag_p99_ms", 0.0)),
              _row("Client processes:", int(c.get("processes", 1))),
              _row("Real-time client processes:", f"{int(c.get('realtime_processes', 0))}"
                   + (f" ({int(c['realtime_refused'])} refused)"
                      if c.get("realtime_refused") else "")),
              _row("Valid:", "yes" if result.valid else f"NO: {result.invalid_reason}")]
    if result.noise:
        lines.append(_row("Halves differ, throughput (%):",
                          100 * result.noise["output_throughput_rel_diff"]))
        lines.append(_row("Halves differ, p99 ITL (%):", 100 * result.noise["p99_itl_rel_diff"]))
    return lines


def _window(result: BenchmarkResult) -> list[str]:
    w = result.window
    if w is None:
        return []
    lines = [_title("Steady window (all clients busy)"),
             _row("Window (s):", w["seconds"]),
             _row("Requests completed in it:", w["requests"]),
             _row("Batches:", w["batches"])]
    for key, label in (("output_throughput", "Output throughput (tok/s):"),
                       ("p99_itl_ms", f"P99 {w['itl_metric'].upper().replace('_', ' ')} (ms):")):
        iv = w[key]
        lines.append(_row(label, "no interval (window too short)" if iv is None else
                          f"{iv['value']:.2f} +- {iv['half_width']:.2f} ({iv['rel']:.1%}); "
                          f"a repeat run +- {iv['repeat_half_width']:.2f}"))
    lines.append(_row("Stopped:", result.stop_reason))
    return lines
