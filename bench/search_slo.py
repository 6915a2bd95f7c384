"""The same runs scored on SLO-feasible points only (as ``tuner.results`` counts a study's
hypervolume): a measured point that misses a study SLO counts for nothing, in the runs and in
the best known front. Computed from the JSON and the evaluation cache, without new runs."""

from __future__ import annotations

import copy
from typing import Any

from search_truth import Truth, front_volume, grid_flags, load_profile, point


def _ok(o: dict[str, Any], limits: dict[str, float]) -> bool:
    return all(o.get(k) is not None and o[k] <= v for k, v in limits.items())


def slo_view(data: dict) -> dict:
    """A copy of ``data`` whose points and fronts keep only SLO-feasible measurements."""
    out = copy.deepcopy(data)
    for key, fr in out["fronts"].items():
        name, rules = key.split("/")
        profile = load_profile(name, rules)
        truth = Truth(profile)
        limits = profile.spec.slo.limits()
        by_point = {(o["output_throughput"], o["p99_itl_ms"]): _ok(o, limits)
                    for o in truth.known.values() if o["started"]}
        ref = (-fr["reference"][0], fr["reference"][1])
        grid = [p for p in (point(o) for o in (truth.outcome(f) for f in grid_flags(profile))
                            if _ok(o, limits)) if p]
        pts = list(grid)
        for r in out["runs"]:
            if (r["profile"], r["rules"]) != (name, rules):
                continue
            r["points"] = [p if p and by_point.get((p[0], p[1]), False) else None
                           for p in r["points"]]
            pts += [(-p[0], p[1]) for p in r["points"] if p]
        fr["hv_grid"] = front_volume(grid, ref)
        fr["hv_best_known"] = front_volume(pts, ref)
        fr["slo"] = limits
    return out
