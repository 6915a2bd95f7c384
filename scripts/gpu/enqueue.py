"""Enqueue named configurations into a stored study, launched exactly as given (like the
baselines), in order: a calibration set for the simulator, for instance.

    python scripts/gpu/enqueue.py STUDY CONFIGS.json [--storage URL]

CONFIGS.json is a list of {"name": ..., "launch": {flag: value, ...}}: the flags put on the
command line (vLLM's defaults for the rest). A name already queued or told is skipped, so
the script can run at the start of every device call.
"""

from __future__ import annotations

import argparse
import json
import sys

from tuner.storage import default_url, open_study
from tuner.trials.queued import enqueue_as_given


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study")
    ap.add_argument("configs")
    ap.add_argument("--storage", default=None)
    args = ap.parse_args(argv)
    opened = open_study(args.study, args.storage or default_url())
    space = opened.space
    seen = {t.user_attrs.get("baseline") for t in opened.study.get_trials(deepcopy=False)}
    added = 0
    for c in json.loads(open(args.configs).read()):
        name = "calib-" + c["name"]
        if name in seen:
            continue
        unknown = set(c["launch"]) - set(space.defaults)
        if unknown:
            print(f"enqueue: {c['name']}: unknown flags {sorted(unknown)}", file=sys.stderr)
            return 2
        flags = {**{k: space.defaults[k] for k in space.names}, **c["launch"]}
        enqueue_as_given(opened.study, (p.name for p in space.params), name, c["launch"],
                         flags)
        added += 1
    print(f"enqueue: {added} configurations queued on {args.study}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
