"""Tables from a GPU capacity study: every trial's curve, start and cost, and our ladder
levels beside `vllm bench serve` at the rates that bracket a trial's capacity.

    .venv/bin/python scripts/gpu/capacity_summary.py DB STUDY OUTDIR

Writes OUTDIR/trials.md, OUTDIR/comparison.md and OUTDIR/trials.json. The comparison's
goals (issue 44): p99 ITL within 10 %, p99 TTFT within 15 %, and the same side of each SLO.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

import optuna

from summarize import SHORT, write_tables  # scripts/gpu/, this script's folder

from tuner.storage.studies import SPEC
from tuner.trials import from_frozen
from tuner.trials.curve import Curve

optuna.logging.set_verbosity(optuna.logging.WARNING)

GOALS = {"p99_itl_ms": 0.10, "p99_ttft_ms": 0.15}


def main(db: str, name: str, out: str) -> int:
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    slo = {k: v for k, v in (study.user_attrs.get(SPEC, {}).get("slo") or {}).items()
           if v is not None}
    rows, cmp_rows, dump, starts, costs = [], [], [], [], []
    for t in study.trials:
        r = from_frozen(t)
        ph, sp = r.phases or {}, r.start_phases
        cache = sp.compile_cache if sp is not None else None
        curve = r.curve
        if ph.get("start") is not None and r.outcome is not None:
            starts.append((t.number, ph["start"], cache))
        ladder_s = ph.get("benchmark", 0.0) + ph.get("ladder", 0.0)  # warm-up and levels
        if curve is not None and ph:  # the cross-check is an extra, not the trial's cost
            rest = sum(ph.get(k, 0.0) for k in ("start", "stop", "gpu_release"))
            costs.append((rest + ladder_s) / 60)
        dump.append({"number": t.number, "state": t.state.name, "values": t.values,
                     **{k: v for k, v in r.to_user_attrs().items()
                        if k in ("outcome", "baseline", "flags", "metrics", "phases",
                                 "start_phases", "curve", "vllm_bench", "gpu_name",
                                 "vllm_version", "failure")}})
        rows.append(_trial_row(t.number, r, curve, ph, ladder_s, cache))
        levels = (r.vllm_bench.levels if r.vllm_bench is not None else None) or ()
        cmp_rows += [_compare_row(t.number, curve, v, slo) for v in levels]
    meta = next((d for d in dump if d.get("gpu_name")), {})
    head = (f"GPU: {meta.get('gpu_name')}, vLLM {meta.get('vllm_version')}; study `{name}`; "
            f"SLOs {slo}.\n\n")
    warm = [s for n, s, _ in starts[1:]]
    hits = sum(1 for _, _, c in starts if c == "hit")
    stats = (f"Starts after the first: median {_med(warm)} s (n={len(warm)}); compile cache "
             f"hits {hits} of {len(starts)} starts. Whole trial (start + warm-up + ladder + "
             f"stop): median {_med(costs)} GPU-minutes (n={len(costs)}).\n\n")
    trials = (head + stats + "| trial | outcome | capacity req/s | tok/s there | p99 ITL ms "
              "@ reference | verdict | levels (rate:held, s: stopped on a miss) | start s | cache | ladder s | "
              "flags |\n" + "|---" * 11 + "|\n" + "\n".join(rows) + "\n")
    compare = (head + "Same server, right after the ladder: our client beside `vllm bench "
               "serve --request-rate` at that rate, as many requests each: the clients "
               "taking turns (medians of each client's runs, [range]), or, in trials "
               "measured before the turns existed, our ladder level then vLLM's one run "
               "(cells: ours / vLLM's (difference, goal met); side: the same side of the "
               "SLO for both).\n\n| trial | rate req/s | runs | p99 ITL ms | p99 TTFT ms | "
               "same side of each SLO |\n|---|---|---|---|---|---|\n" + "\n".join(cmp_rows)
               + "\n")
    write_tables(out, trials, compare, dump)
    return 0


def _trial_row(number: int, r: Any, curve: Curve | None, ph: dict, ladder_s: float,
               cache: str | None) -> str:
    flags = " ".join(f"{SHORT[k]}={v}" for k, v in r.flags.items() if k in SHORT)
    if curve is None:
        cells = "- | - | - | - | -"
    else:
        ref = r.metrics.get("reference_p99_itl_ms")
        tput = curve.capacity_output_throughput
        cells = (f"{curve.capacity_rps:.2f} | {tput or 0:,.0f} | "
                 f"{'-' if ref is None else f'{ref:.1f}'} | {curve.verdict} | "
                 + " ".join(f"{lv.offered_rps:.1f}:"
                            f"{'y' if lv.held else 's' if lv.stopped_early else 'n'}"
                            for lv in curve.levels))
    start = ph.get("start")
    return (f"| {number} | {r.outcome or r.state} | {cells} | "
            f"{'-' if start is None else f'{start:.1f}'} | {cache or '-'} | "
            f"{ladder_s:.0f} | {flags} |")


def _compare_row(number: int, curve: Curve | None, vllm: dict, slo: dict) -> str:
    """One rate: with rounds (``ours`` beside vLLM's ``runs``: the clients took turns)
    the medians of each client's runs, with their ranges; else the ladder's level beside
    vLLM's one run."""
    rate = vllm["request_rate"]
    if "error" in vllm:
        return f"| {number} | {rate:g} | {vllm['error'][:80]} | | | |"
    if vllm.get("ours"):
        mine, theirs = list(vllm["ours"]), list(vllm.get("runs") or [vllm])
        how = f"{len(mine)} turns each"
    else:
        level = next((lv for lv in (curve.measured if curve else ())
                      if lv.offered_rps == rate), None)
        if level is None:
            return f"| {number} | {rate:g} | no level of ours | | | |"
        mine, theirs, how = [level.to_json()], [vllm], "ladder level, then vLLM"
    cells, same = [], []
    for key, goal in GOALS.items():
        a, b = _values(mine, key), _values(theirs, key)
        if not a or not b:
            cells.append("-")
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        d = (ma - mb) / mb
        cells.append(f"{ma:,.1f}{_range(a)} / {mb:,.1f}{_range(b)} "
                     f"({d:+.1%} {'✓' if abs(d) <= goal else '✗'})")
        limit = slo.get(key)
        if limit is not None:
            same.append((ma <= limit) == (mb <= limit))
    return (f"| {number} | {rate:g} | {how} | {' | '.join(cells)} | "
            f"{'yes' if same and all(same) else 'NO'} |")


def _values(runs: list[dict], key: str) -> list[float]:
    return [float(r[key]) for r in runs if r.get(key) is not None]


def _range(values: list[float]) -> str:
    return f" [{min(values):,.1f}-{max(values):,.1f}]" if len(values) > 1 else ""


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
