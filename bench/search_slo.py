"""The runs scored on SLO-feasible points only, as ``tuner`` scores a study (``tuner status``,
the stopping rule, the report): a measured point that misses a study SLO counts for nothing,
in the runs and in the best known front, so the best known front's SLO-feasible part is the
100 %. Computed from the JSON, without new runs: each run's SLO verdicts (``search_run``), or,
for a run written before it kept them, the evaluation cache; a point neither knows stops
the report rather than counting as a miss."""

from __future__ import annotations

import copy
from typing import Any, Mapping

from search_truth import CACHE, Truth, front_volume, grid_flags, load_profile, point
from tuner.spec import StudySpec
from tuner.trials.record import slo_constraints


def meets_slos(spec: StudySpec, outcome: Mapping[str, Any]) -> bool:
    """Whether a started outcome meets every SLO of ``spec``: the runner's own constraints
    (``tuner.trials.record.slo_constraints``, value - limit <= 0)."""
    metrics = {k: v for k, v in outcome.items() if isinstance(v, (int, float))
               and not isinstance(v, bool)}
    return bool(outcome.get("started")) and all(
        v <= 0 for v in slo_constraints(spec, metrics).values())


def slo_view(data: dict) -> dict:
    """A copy of ``data`` whose points and fronts keep only SLO-feasible measurements (both
    references: the whole front's and the default's values)."""
    out = copy.deepcopy(data)
    for key, fr in out["fronts"].items():
        name, rules = key.split("/")
        profile = load_profile(name, rules)
        truth = Truth(profile)
        spec = profile.spec
        by_point = {(o["output_throughput"], o["p99_itl_ms"]): meets_slos(spec, o)
                    for o in truth.known.values() if o["started"]}
        grid = [p for p in (point(o) for o in (truth.outcome(f) for f in grid_flags(profile))
                            if meets_slos(spec, o)) if p]
        pts = list(grid)
        for r in out["runs"]:
            if (r["profile"], r["rules"]) != (name, rules):
                continue
            r["measured_points"] = r["points"]  # what the run measured (its repeats)
            met = r.get("slo") or [None if p is None else by_point.get((p[0], p[1]))
                                   for p in r["points"]]
            unknown = sum(p is not None and m is None for p, m in zip(r["points"], met))
            if unknown:  # never counted as a miss: the report would be quietly wrong
                raise ValueError(
                    f"{key} {r['contender']} seed {r['seed']}: {unknown} measured points carry "
                    f"no SLO verdict and are not in the evaluation cache ({CACHE}); run "
                    "this contender again here (make bench-search) to score it")
            r["points"] = [p if p and m else None for p, m in zip(r["points"], met)]
            pts += [(-p[0], p[1]) for p in r["points"] if p]
        for scored in (fr, fr["default"]):
            ref = (-scored["reference"][0], scored["reference"][1])
            scored["hv_grid"] = front_volume(grid, ref)
            scored["hv_best_known"] = front_volume(pts, ref)
        fr["slo"] = spec.slo.limits()
    return out
