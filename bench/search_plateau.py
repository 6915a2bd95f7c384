"""Why the default sampler proposes where it does (a diagnostic,
docs/decisions/0005-non-chunked-plateau-diagnosis.md):
for each model proposal that runs without chunked prefill at a budget in [--low, --high)
(8B's plateau: every value there is one of two points), what the models said when they
chose it: the aim, whether the candidate was a random one (since round 7 drawn in the trust
region around the front) or a move around the front, the
probability of feasibility, the p99 ITL process's cell weight ``w`` and learned noise, and
its posterior sd (on its scale: the log, round 7's Box-Cox choice for p99 ITL on 8B) at the
candidate split in two: the candidate with only its
token budget and max-model-len (which the rules tie to the budget without chunked
prefill) moved from the nearest measured plateau point ("budget"), and with only its other
flags moved ("others"). Two what-ifs that tell the model what the simulator knows:
``--inert NAMES`` sets those flags' length scales to 30 (inert) after each fit, and
``--noise-free`` fits without learned noise (the simulator has none). It wraps the
sampler's own functions (``fit``, ``fit_power``, ``choose``, ``candidates``) rather
than copying them; one worker only.

    .venv/bin/python bench/search_plateau.py [--rules article] [--seeds 10]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import CONTENDERS, DEFAULT  # noqa: E402
from search_run import run_one  # noqa: E402
from search_truth import Truth, load_profile  # noqa: E402
import tuner.search.front.gp as surrogate  # noqa: E402
import tuner.search.front.model as model  # noqa: E402
import tuner.search.front.proposal as proposal  # noqa: E402
from tuner.search.front.acquisition import aim  # noqa: E402
from tuner.search.front.candidates import onfront, trust_region  # noqa: E402
from tuner.search.front.history import origin  # noqa: E402
from tuner.search.front.model import inverse  # noqa: E402

TIED = ("max_num_batched_tokens", "max_model_len")
SEEN: dict = {}


def _wrap() -> list[dict]:
    """Patch the sampler's functions to record each model proposal; the records."""
    out: list[dict] = []
    fit, fit_power = model.fit, model.fit_power
    choose, candidates = proposal.choose, proposal.candidates

    def fit_(X, y, **k):  # the feasibility processes (fit_power's own fits pass through)
        if SEEN.get("in_power"):
            return fit(X, y, **k)
        gp = _inert(fit(X, y, **k), X, y) if ARGS.inert else fit(X, y, **k)
        SEEN.setdefault("fits", []).append(gp)
        return gp

    def fit_power_(X, v, *a, **k):  # the objectives' processes, on their Box-Cox powers
        SEEN["in_power"] = True
        try:
            gp, power = fit_power(X, v, *a, **k)
        finally:
            SEEN["in_power"] = False
        gp = _inert(gp, X, gp.y) if ARGS.inert else gp
        SEEN.setdefault("fits", []).append(gp)
        SEEN.setdefault("powers", []).append(power)
        return gp, power

    def candidates_(h, s, rng, lengths=None):
        state = rng.bit_generator.state  # the trust region's candidates are drawn first
        again = np.random.default_rng()
        again.bit_generator.state = state
        region = trust_region(h.measured_x[onfront(h)], h.enc.categorical(), lengths,
                              s.candidates, again, s)
        SEEN.update(view=h, settings=s, X=h.measured_x, random=region)
        SEEN["cands"] = candidates(h, s, rng, lengths)
        if not len(SEEN["cands"]):  # the proposal ends here, without choose
            SEEN["fits"], SEEN["powers"] = [], []
        return SEEN["cands"]

    def choose_(gain, pf, sd, any_feasible, nudge):
        best = choose(gain, pf, sd, any_feasible, nudge)
        out.append(_record(best, pf))
        SEEN["fits"], SEEN["powers"] = [], []
        return best

    model.fit, model.fit_power = fit_, fit_power_
    proposal.choose, proposal.candidates = choose_, candidates_
    return out


def _inert(gp, X, y):
    """``gp`` with the ``--inert`` flags' length scales (shared and each cell's) at 30."""
    idx = [_names().index(n) for n in ARGS.inert]
    k = gp.kernel
    lengths = k.lengths.copy()
    lengths[idx] = 30.0
    cell = None if k.cell_lengths is None else k.cell_lengths.copy()
    if cell is not None:
        cell[..., idx] = 30.0
    kernel = surrogate.Kernel(lengths, k.cells, cell, k.share)
    return surrogate._posterior(X, y, kernel, gp.noise, gp.mean, gp.scale)[1]


def _names() -> list[str]:
    """The encoding's dimension names (sorted, as ``Encoding.names``)."""
    return sorted(SEEN["space"])


def _record(best: int, pf: np.ndarray) -> dict:
    view, s, X, cands = SEEN["view"], SEEN["settings"], SEEN["X"], SEEN["cands"]
    itl = SEEN["fits"][1]  # the objectives' processes are fitted first (one worker)
    enc, c = view.enc, cands[best]
    rand = np.array([enc.snap(x) for x in SEEN["random"]])
    fixed = [s.repair(enc.decode(x)) if s.repair else enc.decode(x) for x in rand]
    rand = np.array([enc.encode(f) for f in fixed if f is not None])
    rec = {"params": enc.decode(c), "aim": aim(view.moves, view.count, s.ends),
           "pf": float(pf[best]),
           "w": itl.kernel.share, "noise": itl.noise_sd, "n": len(view.measured),
           "source": "random" if (np.abs(rand - c).max(1) < 1e-9).any() else "move"}
    plateau = [i for i, t in enumerate(view.measured) if _on_plateau(
        origin(t, view.space), ARGS.low, ARGS.high)]
    if plateau:
        j = min(plateau, key=lambda i: np.linalg.norm(X[i] - c))
        tied = [enc.names.index(n) for n in TIED]
        budget, others = X[j].copy(), c.copy()
        budget[tied], others[tied] = c[tied], X[j][tied]
        rec["sd"] = itl.predict(np.vstack([X[j], budget, others, c]))[1].tolist()
        mean = inverse(itl.predict(c[None])[0], SEEN["powers"][1])[0]
        rec["mean_below"] = bool(mean < view.measured[j].values[1])
        rec["changed"] = [n for n, a, b in zip(enc.names, X[j], c) if abs(a - b) > 1e-9]
    return rec


def _on_plateau(flags: dict, low: int, high: int) -> bool:
    return not flags["enable_chunked_prefill"] and low <= flags["max_num_batched_tokens"] < high


def main(argv=None) -> int:
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="llama3-8b-h200")
    ap.add_argument("--rules", default="article")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--low", type=int, default=1152)
    ap.add_argument("--high", type=int, default=2400)
    ap.add_argument("--inert", nargs="*", default=[])
    ap.add_argument("--noise-free", action="store_true")
    ARGS = ap.parse_args(argv)
    if ARGS.noise_free:
        surrogate.PROCESS = dataclasses.replace(surrogate.PROCESS, noises=(1e-4,))
    records = _wrap()
    profile = load_profile(ARGS.profile, ARGS.rules)
    SEEN["space"] = profile.space.distributions()
    truth = Truth(profile)
    contender = next(c for c in CONTENDERS if c.name == DEFAULT)
    chosen: list[dict] = []
    for seed in range(ARGS.seeds):
        records.clear()
        run_one(profile, truth, contender, seed, 24, [])
        # a proposal at n measured trials is told trial n + 2 or so (one baseline fails):
        # keep those within the first --trials told trials, as bench/search_moves.py
        chosen += [r for r in records if r["n"] < ARGS.trials - 1]
    here = [r for r in chosen if _on_plateau(r["params"], ARGS.low, ARGS.high)]
    print(f"{ARGS.profile}/{ARGS.rules}: {len(here)} of {len(chosen)} model proposals on the"
          f" plateau; aims {dict(Counter(r['aim'] for r in here))};"
          f" sources {dict(Counter(r['source'] for r in here))}")
    split = [r for r in here if "sd" in r]
    for i, name in enumerate(("at the plateau point", "budget moved", "others moved",
                              "candidate")):
        sds = [r["sd"][i] for r in split]
        print(f"  p99 ITL posterior sd (log), {name}: median {statistics.median(sds):.2f}")
    print(f"  the p99 ITL mean at the candidate below the plateau point's value: "
          f"{sum(r['mean_below'] for r in split)} of {len(split)}")
    print(f"  learned noise sd (log p99 ITL): median "
          f"{statistics.median(r['noise'] for r in here):.3f}; cell weight w:"
          f" {dict(Counter(r['w'] for r in here))}; P(feasible): median "
          f"{statistics.median(r['pf'] for r in here):.2f}")
    print(f"  flags changed from the nearest plateau point: median "
          f"{statistics.median(len(r['changed']) for r in split)};"
          f" {dict(Counter(n for r in split for n in r['changed']).most_common())}")
    return 0


ARGS: argparse.Namespace


if __name__ == "__main__":
    raise SystemExit(main())
