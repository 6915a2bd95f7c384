"""Tables from a GPU study database: every trial's flags and metrics, and our load
generator beside `vllm bench serve` on the trials that cross-checked.

    .venv/bin/python scripts/gpu/summarize.py results/h200/study.db llama3-8b-h200 results/h200
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna

from tuner.runner import crosscheck
from tuner.trials import TrialRecord, from_frozen

optuna.logging.set_verbosity(optuna.logging.WARNING)

SHORT = {"max_num_batched_tokens": "budget", "max_model_len": "max-len",
         "gpu_memory_utilization": "mem", "enable_prefix_caching": "prefix",
         "enable_chunked_prefill": "chunked", "enforce_eager": "eager",
         "max_num_seqs": "seqs", "block_size": "block", "kv_cache_dtype": "kv"}
COMPARE = ("output_throughput", "median_ttft_ms", "median_itl_ms", "p99_itl_ms", "p99_ttft_ms")
GOAL = {"output_throughput": 0.05, "median_ttft_ms": 0.10, "median_itl_ms": 0.10}


def main(db: str, name: str, out: str) -> int:
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    rows, cmp_rows, dump = [], [], []
    for t in study.trials:
        r = from_frozen(t)
        u = r.to_user_attrs()
        m, f = r.metrics, r.flags
        dump.append({"number": t.number, "state": t.state.name, **{k: u.get(k) for k in (
            "outcome", "baseline", "flags", "command", "metrics", "vllm_bench", "server",
            "noise", "phases", "start_phases", "window", "stop_reason", "repeats",
            "spread", "kv_cache_tokens", "vllm_version", "gpu_name", "duplicate_of",
            "failure")}})
        flags = " ".join(f"{SHORT[k]}={v}" for k, v in f.items() if k in SHORT)
        tput = f"{m['output_throughput']:,.0f}" if m else "-"
        itl = f"{m['p99_itl_ms']:.1f}" if m else "-"
        ttft = f"{m['median_ttft_ms']:,.0f}" if m else "-"
        p99_ttft = f"{m['p99_ttft_ms']:,.0f}" if m else "-"
        sp = r.spread or {}
        runs = (f"{sp['output_throughput'].n} ({sp['output_throughput'].rel:.1%} / "
                f"{sp['p99_itl_ms'].rel:.1%})" if "p99_itl_ms" in sp else ("1" if m else "-"))
        sent = f"{m['completed']:,.0f} ({r.stop_reason or '-'})" if m else "-"
        note = r.baseline or (f"duplicate of {r.duplicate_of}" if r.duplicate_of is not None
                              else "")
        rows.append(f"| {t.number} | {r.outcome or r.state} | {note} | "
                    f"{tput} | {itl} | {ttft} | {p99_ttft} | {runs} | {sent} | "
                    f"{r.kv_cache_tokens or '-'} | {flags} |")
        v = r.vllm_bench or {}
        if v and m:
            cmp_rows += [f"| {t.number} | {r.baseline or 'sampled'} | {label} | "
                         + " | ".join(_cell(ours, v, k) for k in COMPARE) + " |"
                         for label, ours in _our_runs(r)]
            if v.get("runs"):
                cmp_rows.append(f"| {t.number} | {r.baseline or 'sampled'} | vLLM's own "
                                f"{len(v['runs'])} runs, back to back: their range (spread) | "
                                + " | ".join(_own(v, k) for k in COMPARE) + " |")
    meta = next((d for d in dump if d.get("gpu_name")), {})
    head = (f"GPU: {meta.get('gpu_name')}, vLLM {meta.get('vllm_version')}; study `{name}` "
            f"(studies/{name}.toml): random prompts 1024 in / 128 out, closed loop at "
            "concurrency 256. Throughput and p99 ITL (the objectives) are the medians over a "
            "trial's runs on one server (runs: how many, and the range of throughput / p99 "
            "ITL over them), TTFT the first run's; requests: "
            "completed in the first run, and why it stopped (count, or the early stop's "
            "`early` / `cap`).\n\n")
    trials = (head + "| trial | outcome | baseline / note | output tok/s | p99 ITL ms | "
              "median TTFT ms | p99 TTFT ms | runs (spread) | requests | KV-cache tokens | "
              "flags |\n" + "|---" * 11 + "|\n"
              + "\n".join(rows) + "\n")
    compare = (head + "Same server, same workload, run back to back: ours (the first run "
               "and any confirmation runs), then `vllm bench serve` (cells: ours / vLLM's "
               "(difference); goals: throughput within 5 %, median TTFT and ITL within "
               "10 %). A trial's first line is our run right before vLLM's, the one to compare "
               "with; a trial with confirmation runs has a second line, our first run on the "
               "fresh server, whose whole-run p99 ITL often reads well above the later runs' "
               "(docs/loadgen.md, \"The first run on a fresh server\"). `-`: a figure "
               "that a study stored before each run kept its TTFT and median ITL lacks. With "
               "`engine.crosscheck_repeats` > 1 a last line gives vLLM's own range over its "
               "runs on that server.\n\n"
               "| trial | config | our run | " + " | ".join(COMPARE) + " |\n"
               + "|---" * (len(COMPARE) + 3) + "|\n" + "\n".join(cmp_rows) + "\n")
    write_tables(out, trials, compare, dump)
    return 0


def write_tables(out: str, trials: str, compare: str, dump: list[dict[str, Any]]) -> None:
    """OUT/trials.md, OUT/comparison.md and OUT/trials.json; the tables printed too."""
    Path(out, "trials.md").write_text(trials)
    Path(out, "comparison.md").write_text(compare)
    Path(out, "trials.json").write_text(json.dumps(dump, indent=1, default=str))
    print(trials)
    print(compare)


def _our_runs(r: TrialRecord) -> list[tuple[str, Mapping[str, float]]]:
    """Our runs to set beside vLLM's, labelled: the one right before it, then the first."""
    n = len(r.repeats)
    if n < 2:
        return [("run 1 of 1, right before vLLM's", r.first_run)]
    last = f"run {n} of {n}, right before vLLM's"
    if any(w.startswith("confirmation run") for w in r.rejected_runs):
        last += " (and a rejected confirmation run)"
    missing = [k for k in COMPARE if k not in r.last_run]
    if missing:
        last += f" ({', '.join(missing)}: not kept, a study stored before runs kept them)"
    return [(last, r.last_run), (f"run 1 of {n}, the first on the fresh server", r.first_run)]


def _own(vllm: Mapping[str, Any], key: str) -> str:
    """vLLM's range of ``key`` over its repeated runs, and the spread relative to their
    median: what a difference between the clients is to be read against."""
    r = crosscheck.spread(vllm, key)
    return "-" if r is None else f"{r[0]:,.1f}-{r[1]:,.1f} ({r[2]:.1%})"


def _cell(ours: Mapping[str, float], vllm: Mapping[str, float], key: str) -> str:
    """ours / vLLM's (difference, and whether it meets the goal); `-` where ours is missing."""
    if key not in ours:
        return f"- / {vllm[key]:,.1f}"
    d = (ours[key] - vllm[key]) / vllm[key]
    goal = GOAL.get(key)
    mark = "" if goal is None else (" ✓" if abs(d) <= goal else " ✗")
    return f"{ours[key]:,.1f} / {vllm[key]:,.1f} ({d:+.1%}{mark})"


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
