#!/usr/bin/env bash
# On the GPU machine: install what is missing (kit, wheels, model), bring back the study's
# SQLite database from the last command (.gpu-state/tuner.db, carried), run `tuner worker`
# for N trials, and put the database and the trial logs into $OUT.
#
#   bash scripts/gpu/run-worker.sh STUDY_FILE N_TRIALS [WORKER_TIMEOUT] [HARD_LIMIT_S]
# WORKER_TIMEOUT: no new trial after it. ENQUEUE=FILE.json (optional) queues those named
# configurations after the baselines (scripts/gpu/enqueue.py; a calibration set, say). HARD_LIMIT_S (default 540) interrupts the worker
# (SIGINT: the running trial is recorded as stopped and queued again) so that the database
# and the logs always reach $OUT before the device call's 10-minute limit.
set -euo pipefail
cd "$(dirname "$0")/../.."
study_file=$1 n=$2 limit=${3:-6m} hard=${4:-540}
deadline=$((SECONDS + hard))
bash scripts/gpu/install.sh
source scripts/gpu/env.sh
export TUNER_HOME=${TUNER_HOME:-/root/tuner-home}
mkdir -p "$TUNER_HOME"
if [ -f .gpu-state/tuner.db ] && [ ! -f "$TUNER_HOME/tuner.db" ]; then
  cp .gpu-state/tuner.db "$TUNER_HOME/tuner.db"
  echo "run-worker: resumed the study database carried from the last command"
fi
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv
name=$(basename "$study_file" .toml)
PYTHONUNBUFFERED=1 "$TUNER_GPU_PY" -m tuner study create "$study_file"
if [ -n "${ENQUEUE:-}" ]; then
  PYTHONUNBUFFERED=1 "$TUNER_GPU_PY" scripts/gpu/enqueue.py "$name" "$ENQUEUE"
fi
left=$((deadline - SECONDS)); [ "$left" -gt 10 ] || left=10
PYTHONUNBUFFERED=1 timeout -s INT -k 30 "$left" "$TUNER_GPU_PY" -m tuner worker "$name" --gpus 0 \
  --n-trials "$n" --timeout "$limit" || echo "run-worker: worker exited with $?"
if [ -n "${OUT:-}" ]; then
  cp "$TUNER_HOME/tuner.db" "$OUT/tuner.db"
  tar czf "$OUT/logs.tgz" -C "$TUNER_HOME/studies" . 2>/dev/null || true
fi
