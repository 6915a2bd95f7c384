#!/usr/bin/env bash
# rate-ladders.sh -- real latency-vs-load curves (issue 49, part 1) on the GPU machine.
#
# Usage (repo root, GPU machine; the kit's parts carried in PARTS, default .kit/p5):
#   bash scripts/gpu/rate-ladders.sh PARTS CONFIG [CONFIG ...]
# As profile-starts.sh: calls before the last carry one kit part each; the last installs
# vLLM, writes the 8B-shaped model folder and runs scripts/gpu/rate_ladder.py. Results land
# in $OUT/ladders.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PARTS=${1:-$REPO/.kit/p5}; shift
source "$REPO/scripts/gpu/kit-ready.sh"
mkdir -p "$OUT/ladders"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/ladders/gpu.txt"
"$TUNER_GPU_PY" "$REPO/scripts/gpu/rate_ladder.py" "$MODEL" "$OUT/ladders" "$@"
