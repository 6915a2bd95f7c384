#!/usr/bin/env bash
# profile-starts.sh -- where a vLLM start's time goes (issue 45, part 1), on the GPU machine.
#
# Usage (repo root, GPU machine; the kit's parts carried in PARTS, default .kit/p5):
#   bash scripts/gpu/profile-starts.sh PARTS LABEL STARTS [NAME=VALUE ...]
#   bash scripts/gpu/profile-starts.sh PARTS paths STARTS [NAME=VALUE ...]   (start_paths.py:
#        STARTS plain and STARTS pre-imported starts, each benchmarked; issue 45, part 2;
#        the compile cache stays in /root/start-paths-cache, so a next call on the warm
#        machine with FIRST=K in its environment adds starts K.. without a warm-up start;
#        run it under `timeout N`, N below the call's limit: $OUT then gets start-paths.json
#        and start-paths-files.tgz, every call's logs and benchmarks, even when cut short)
# Calls before the last carry one part each: install.sh copies it and exits 3 until all
# parts are there. The last call installs vLLM (tuner's own wheels are not needed: the
# profile runs vLLM alone), writes the 8B-shaped model folder and runs
# scripts/gpu/start_profile.py on one compiled configuration, STARTS times on one compile
# cache; NAME=VALUE pairs go to the server's environment. Results land in $OUT.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PARTS=${1:-$REPO/.kit/p5}; LABEL=${2:-default}; STARTS=${3:-3}; shift 3 || true
source "$REPO/scripts/gpu/kit-ready.sh"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
envs=(); for e in "$@"; do envs+=(--env "$e"); done
if [ "$LABEL" = paths ]; then
  # The device returns only a few files, and nothing of a call its limit kills: the starts
  # write to RAW (kept across calls on the warm machine), and on exit, or on TERM from an
  # outer `timeout N` (N below the call's limit), start-paths.json and one tarball of RAW
  # go to $OUT.
  RAW=/root/start-paths-out; mkdir -p "$RAW"
  pack() { cp "$RAW/start-paths.json" "$OUT/" 2>/dev/null
           tar czf "$OUT/start-paths-files.tgz" -C "$RAW" . ; }
  "$TUNER_GPU_PY" "$REPO/scripts/gpu/start_paths.py" "$MODEL" "$RAW" --starts "$STARTS" \
    --first "${FIRST:-0}" --cache /root/start-paths-cache \
    --python "$TUNER_GPU_PY" "${envs[@]}" -- --max-num-batched-tokens 2048 --max-num-seqs 256 &
  child=$!
  trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; pack; exit 124' TERM INT
  wait "$child"; rc=$?
  pack; exit "$rc"
fi
skip=(); [ "$LABEL" = default ] || skip=(--skip-imports)
"$TUNER_GPU_PY" "$REPO/scripts/gpu/start_profile.py" "$MODEL" "$OUT" --label "$LABEL" \
  --starts "$STARTS" --python "$TUNER_GPU_PY" "${skip[@]}" "${envs[@]}" -- \
  --max-num-batched-tokens 2048 --max-num-seqs 256
