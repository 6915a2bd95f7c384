"""Start phases of every launched trial on the H200, from the recorded studies (no device).

    .venv/bin/python scripts/gpu/start_phases.py > results/h200/start-phases.md

Per trial: the start (spawn to healthy, as the worker timed it) and, where the trial
recorded them (tuner/engine/startlog.py, from the vLLM log), its phases and whether
vLLM's torch.compile cache hit. The study of 2026-12-01 predates the phase parser: its
starts only, with hit / miss read from the start time and whether an earlier trial of the
study had the same compile key (budget, sequences, KV dtype).
"""

from __future__ import annotations

import statistics
import sys

import optuna

from tuner.trials import from_frozen

optuna.logging.set_verbosity(optuna.logging.WARNING)

SETS = (("2026-12-01 study (before the start-phase parser)", "../shared/h200-2026-12-01/study.db",
         "llama3-8b-h200-p4"),
        ("2026-12-01 calibration", "results/h200/calibration/study.db", "llama3-8b-h200-calib"),
        ("2026-12-01 round 2 study", "results/h200/round2/study.db", "llama3-8b-h200"))
PHASES = ("process_start", "api_start", "init_engine", "compile", "graph_capture",
          "kv_profile", "warmup")


def key(flags) -> tuple:
    """What vLLM 0.24's compile cache is keyed on, as these runs show: the compile range
    (1, budget), the sequences (CUDA graph sizes) and the KV dtype."""
    return (flags.get("max_num_batched_tokens"), flags.get("max_num_seqs"),
            flags.get("kv_cache_dtype"), flags.get("enforce_eager"))


def rows(db: str, name: str) -> list[list[str]]:
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    out, seen, starts = [], set(), []
    for t in study.trials:
        r = from_frozen(t)
        start = (r.phases or {}).get("start")
        if not start:
            continue
        sp = dict(r.start_phases or {})
        f = r.flags
        cache = sp.get("compile_cache") or ("eager" if f.get("enforce_eager") else (
            "repeat" if key(f) in seen else "new key"))
        seen.add(key(f))
        out.append([str(t.number), str(f.get("max_num_batched_tokens")),
                    str(f.get("max_num_seqs")), "eager" if f.get("enforce_eager") else "graphs",
                    f"{start:.1f}", cache, *(f"{sp[p]:.1f}" if p in sp else "-" for p in PHASES)])
        starts.append(start)
    tail = starts[1:]
    out.append(["median after the first", "", "", "", f"{statistics.median(tail):.1f}" if tail
                else "-", "", *[""] * len(PHASES)])
    return out


def main() -> int:
    print("# Start phases on the H200 (vLLM 0.24.0, Llama-3-8B shape, dummy weights)\n")
    print(__doc__.split("\n\n", 2)[2].strip() + "\n")
    head = ["trial", "budget", "seqs", "mode", "start s", "compile cache", *PHASES]
    for label, db, name in SETS:
        print(f"## {label}\n\n`{db}`, study `{name}`\n")
        print("| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
        for row in rows(db, name):
            print("| " + " | ".join(row) + " |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
