#!/usr/bin/env bash
# On a GPU machine with two GPUs: two `tuner worker` processes on one study, each pinned to
# one GPU (--gpus 0, --gpus 1), sharing one SQLite database; the database and the server
# logs go into $OUT.
#
#   bash scripts/gpu/run-two-workers.sh STUDY_FILE TRIALS_PER_WORKER [WORKER_TIMEOUT] [HARD_LIMIT_S]
# HARD_LIMIT_S (default 480) interrupts both workers (SIGINT: the running trial is recorded
# as stopped) so that the database is always copied back within one device call.
set -euo pipefail
cd "$(dirname "$0")/../.."
study_file=$1 n=$2 limit=${3:-4m} hard=${4:-480}
bash scripts/gpu/install.sh
source scripts/gpu/env.sh
export TUNER_HOME=${TUNER_HOME:-/root/tuner-home}
mkdir -p "$TUNER_HOME"
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv
name=$(basename "$study_file" .toml)
PYTHONUNBUFFERED=1 "$TUNER_GPU_PY" -m tuner study create "$study_file"
pids=()
for gpu in 0 1; do
  PYTHONUNBUFFERED=1 timeout -s INT "$hard" "$TUNER_GPU_PY" -m tuner worker "$name" \
    --gpus "$gpu" --n-trials "$n" --timeout "$limit" 2>&1 | sed -u "s/^/[gpu $gpu] /" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || echo "run-two-workers: a worker exited with $?"; done
PYTHONUNBUFFERED=1 "$TUNER_GPU_PY" -m tuner status "$name" --once 2>&1 | tail -20 || true
if [ -n "${OUT:-}" ]; then
  cp "$TUNER_HOME/tuner.db" "$OUT/tuner-2gpu.db"
  tar czf "$OUT/logs-2gpu.tgz" -C "$TUNER_HOME/studies" . 2>/dev/null || true
fi
