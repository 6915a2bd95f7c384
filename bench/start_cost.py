"""What a capacity trial costs in GPU-seconds, from the committed H100 capacity study
(``results/h100/capacity/trials.json``: 15 trials, their measured phases), never assumed.

A launched trial costs ``start + warm-up + ladder + stop`` seconds times its GPUs
(``tensor_parallel_size``):

- start: the median measured start of its class. *eager* (``enforce_eager``); *compiled*
  (CUDA graphs, a start after the machine's first: pre-imported, a compile-cache miss but
  for one hit); *first*, the machine's first compiled start, which also pays the supervisor's
  import and a cold compile (a start whose ``process_start`` phase took at least
  ``FIRST_IMPORT_S``: the import). An eager first start adds the import's median;
- warm-up: the study's warm-up requests (``WARMUP_REQUESTS``, as the H100 study) at the
  configuration's saturated request rate (the simulator's closed loop);
- ladder and stop: the measured medians (the ladder's levels are not simulated here);
- a configuration that does not start: its start, nothing more.

Rule-infeasible and duplicate proposals cost nothing (the runner never launches them).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

TRIALS = Path(__file__).resolve().parents[1] / "results/h100/capacity/trials.json"
FIRST_IMPORT_S = 10.0  # a process_start this long paid the supervisor's import
WARMUP_REQUESTS = 400  # the H100 capacity studies' warm-up (studies/llama3-8b-h100-capacity*)


@dataclass(frozen=True)
class StartCost:
    """Median seconds per phase class, and how many starts each rests on."""

    eager: float
    compiled: float
    first: float
    import_s: float
    ladder: float
    stop: float
    counts: dict

    def trial_s(self, eager: bool, first: bool, started: bool, warmup_s: float,
                gpus: int = 1) -> float:
        """GPU-seconds of one launched trial."""
        start = self.eager + (self.import_s if first else 0.0) if eager else \
            (self.first if first else self.compiled)
        if not started:
            return start * gpus
        return (start + warmup_s + self.ladder + self.stop) * gpus

    def source(self) -> str:
        c = self.counts
        return (f"{TRIALS.relative_to(TRIALS.parents[3])}: median start eager {self.eager:.1f} s "
                f"(n={c['eager']}), compiled {self.compiled:.1f} s (n={c['compiled']}), the "
                f"machine's first compiled {self.first:.1f} s (n={c['first']}; its import "
                f"{self.import_s:.1f} s), ladder {self.ladder:.1f} s and stop "
                f"{self.stop:.1f} s (n={c['ladder']}); warm-up {WARMUP_REQUESTS} requests at "
                "the simulated saturated rate")


def load(path: Path = TRIALS) -> StartCost:
    """The medians of the measured trials' phases."""
    eager, compiled, first, imports, ladder, stop = [], [], [], [], [], []
    for t in json.loads(path.read_text()):
        ph, sp = t.get("phases") or {}, t.get("start_phases") or {}
        if "start" not in ph:
            continue
        if t["flags"].get("enforce_eager"):
            eager.append(ph["start"])
        elif sp.get("process_start", 0.0) >= FIRST_IMPORT_S:
            first.append(ph["start"])
            imports.append(sp["process_start"])
        else:
            compiled.append(ph["start"])
        if "ladder" in ph:
            ladder.append(ph["ladder"])
            stop.append(ph.get("stop", 0.0) + ph.get("gpu_release", 0.0))
    med = statistics.median
    return StartCost(med(eager), med(compiled), med(first), med(imports), med(ladder),
                     med(stop), {"eager": len(eager), "compiled": len(compiled),
                                 "first": len(first), "ladder": len(ladder)})
