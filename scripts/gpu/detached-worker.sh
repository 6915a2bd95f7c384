#!/usr/bin/env bash
# On the GPU machine: one `tuner worker` that lives across back-to-back device calls (the
# machine stays warm between them), so that no call's 10-minute end interrupts a trial and
# no restart repeats the engine probe. Each call: install what is missing, start the
# worker detached (setsid) unless it runs already, watch it for WATCH_S seconds (progress
# every 30 s), then put a consistent copy of the study database (SQLite's backup API, safe
# while the worker writes) and the trial logs into $OUT.
#
#   bash scripts/gpu/detached-worker.sh STUDY_FILE N_TRIALS WATCH_S
# STOP=1: interrupt the worker instead (SIGINT: a running trial is recorded as stopped and
# queued again) and wait up to WATCH_S for it to exit, then copy. DRAIN=1: `tuner stop` (the
# running trial finishes, then the worker exits), waiting up to WATCH_S; once no worker
# runs, the stop request is cleared, as it is before a worker starts (`tuner launch` does
# the same; a plain `tuner worker` on a study with the request set exits at once). The
# worker's own output is $TUNER_HOME/worker.log (also copied). ENQUEUE=CONFIGS.json: queue those
# configurations (scripts/gpu/enqueue.py; already queued ones are skipped) after the study
# is created and before the worker starts. A carried .gpu-state/tuner.db (an earlier
# window's study) is resumed when the box has no study database yet.
set -euo pipefail
cd "$(dirname "$0")/../.."
study_file=$1 n=$2 watch=$3
[ -f /tmp/site/.tuner-wheels ] || bash scripts/gpu/install.sh
source scripts/gpu/env.sh
source scripts/gpu/watch.sh
export TUNER_HOME=${TUNER_HOME:-/root/tuner-home}
mkdir -p "$TUNER_HOME"
if [ -f .gpu-state/tuner.db ] && [ ! -f "$TUNER_HOME/tuner.db" ]; then
  cp .gpu-state/tuner.db "$TUNER_HOME/tuner.db"  # resume a study from an earlier window
  echo "detached-worker: resumed the study database carried in .gpu-state/tuner.db"
fi
name=$(basename "$study_file" .toml)
pidfile=$TUNER_HOME/worker.pid
running() { job_running "$pidfile"; }
clear_stop() {  # a stop request left in the study (as `tuner launch` does before it starts)
  "$TUNER_GPU_PY" - "$TUNER_HOME/tuner.db" "$name" <<'PYEOF'
import sys, optuna
from tuner.storage.registry import STOP
study = optuna.load_study(study_name=sys.argv[2], storage=f"sqlite:///{sys.argv[1]}")
if study.user_attrs.get(STOP):
    study.set_user_attr(STOP, None)
    print("detached-worker: cleared the study's stop request")
PYEOF
}

if [ "${DRAIN:-0}" = 1 ]; then
  if running; then
    PYTHONUNBUFFERED=1 "$TUNER_GPU_PY" -m tuner stop "$name" --timeout "${watch}s" || true
  fi
  running || clear_stop
elif [ "${STOP:-0}" = 1 ]; then
  if running; then kill -INT "$(cat "$pidfile")"; echo "detached-worker: interrupted the worker"; fi
elif running; then
  echo "detached-worker: the worker (pid $(cat "$pidfile")) still runs"
else
  nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv
  PYTHONUNBUFFERED=1 "$TUNER_GPU_PY" -m tuner study create "$study_file"
  if [ -n "${ENQUEUE:-}" ]; then
    PYTHONUNBUFFERED=1 "$TUNER_GPU_PY" scripts/gpu/enqueue.py "$name" "$ENQUEUE" \
      --storage "sqlite:///$TUNER_HOME/tuner.db"
  fi
  clear_stop
  PYTHONUNBUFFERED=1 setsid nohup "$TUNER_GPU_PY" -m tuner worker "$name" --gpus 0 \
    --n-trials "$n" --trust-stored-engine >> "$TUNER_HOME/worker.log" 2>&1 < /dev/null &
  echo $! > "$pidfile"
  echo "detached-worker: started the worker (pid $!)"
fi

watch_job "$pidfile" "$TUNER_HOME/worker.log" "$watch" "detached-worker: the worker"

if [ -n "${OUT:-}" ]; then
  "$TUNER_GPU_PY" - "$TUNER_HOME/tuner.db" "$OUT/tuner.db" <<'PYEOF'
import sqlite3, sys
src, dst = sqlite3.connect(sys.argv[1], timeout=60), sqlite3.connect(sys.argv[2])
with dst:
    src.backup(dst)
print("detached-worker: copied the study database")
PYEOF
  cp "$TUNER_HOME/worker.log" "$OUT/worker.log"
  tar czf "$OUT/logs.tgz" -C "$TUNER_HOME/studies" . 2>/dev/null || true
  PYTHONUNBUFFERED=1 "$TUNER_GPU_PY" -m tuner status "$name" 2>&1 | head -20 || true
fi
