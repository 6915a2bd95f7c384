"""The markdown table of `bench/compare_vllm_study.py`'s results: per case and metric, each
client's runs, the difference between the clients' medians, and each client's own spread
over its runs on the same server.

    .venv/bin/python bench/compare_table.py results/h200/clients/*.json > table.md

A difference is judged against its goal (throughput 5 %, median TTFT and ITL 10 %) and
against the clients' own spreads: where one client's runs spread wider than the goal on
the same server, one run of each cannot settle the goal (docs/loadgen.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

METRICS = ("output_throughput", "median_ttft_ms", "median_itl_ms", "p99_itl_ms",
           "median_tpot_ms", "median_e2el_ms", "p99_ttft_ms")


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"


def _runs(values: list[float]) -> str:
    return ", ".join(_fmt(v) for v in values)


def case_rows(name: str, data: dict) -> list[str]:
    table = data.get("table", {})
    n = (len(data["runs"]["ours"]), len(data["runs"]["vllm"]))
    rows = []
    for key in METRICS:
        row = table.get(key)
        if row is None:
            continue
        goal = row.get("goal")
        verdict = "" if goal is None else (" ✓" if row["within_goal"] else " ✗")
        rows.append(f"| {name} | {key} | {_runs(row['ours'])} | {_runs(row['vllm'])} | "
                    f"{row['difference']:+.1%}{verdict} | {row['ours_spread']:.1%} | "
                    f"{row['vllm_spread']:.1%} |")
    return [f"| **{name}** ({n[0]} runs of ours, {n[1]} of vLLM's) | | | | | | |"] + rows


def main(paths: list[str]) -> int:
    print("| case | metric | ours (each run) | vLLM's (each run) | difference of medians "
          "| spread of ours | spread of vLLM's |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        data = json.loads(Path(path).read_text())
        for line in case_rows(Path(path).stem, data):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
