#!/usr/bin/env bash
# On the GPU machine: our client beside `vllm bench serve` on the same servers, several
# runs of each in turn (bench/compare_vllm_study.py), for issue 16's comparison. One job
# that lives across back-to-back device calls (started with setsid on the first call, as
# detached-worker.sh does): each call starts it unless it runs or has run, watches it for
# WATCH_S seconds, then copies what it wrote so far into $OUT/clients/.
#
#   bash scripts/gpu/clients.sh WATCH_S
#
# The cases, in order (each its own server; a case's JSON is rewritten after every run):
#   c256-default   vLLM's defaults at the study's workload (concurrency 256, early stop,
#                  at most 1,800 requests), 256 priming requests first, 3 runs of each client
#   c16-default    the same server flags at concurrency 16, 400 requests a run: below
#                  saturation, 3 runs of each
#   c256-trial3    round 2's trial 3 (budget 1,222, 157 sequences, no prefix caching) at the
#                  study's workload, 256 priming requests, 2 runs of each
#   c256-n1000     vLLM's defaults, a fixed 1,000 requests (round 1's length), 2 runs of each
set -euo pipefail
cd "$(dirname "$0")/../.."
watch=$1
[ -f /tmp/site/.tuner-wheels ] || bash scripts/gpu/install.sh
source scripts/gpu/env.sh
source scripts/gpu/watch.sh
export TUNER_HOME=${TUNER_HOME:-/root/tuner-home}
dir=$TUNER_HOME/clients
mkdir -p "$dir"
pidfile=$dir/job.pid
running() { job_running "$pidfile"; }

if running; then
  echo "clients: the job (pid $(cat "$pidfile")) still runs"
elif [ -f "$dir/job.log" ]; then
  echo "clients: the job has run (see job.log)"
else
  nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv
  study=studies/llama3-8b-h200.toml
  cmp="$TUNER_GPU_PY bench/compare_vllm_study.py $study"
  trial3='{"max_num_batched_tokens": 1222, "max_num_seqs": 157, "enable_prefix_caching": false}'
  PYTHONUNBUFFERED=1 setsid nohup bash -c "
    $cmp --prime 256 --repeats 3 --out $dir/c256-default.json
    $cmp --concurrency 16 --num-requests 400 --repeats 3 --out $dir/c16-default.json
    $cmp --flags '$trial3' --prime 256 --repeats 2 --out $dir/c256-trial3.json
    $cmp --num-requests 1000 --repeats 2 --out $dir/c256-n1000.json
    echo 'clients: all cases done'
  " >> "$dir/job.log" 2>&1 < /dev/null &
  echo $! > "$pidfile"
  echo "clients: started the job (pid $!)"
fi

watch_job "$pidfile" "$dir/job.log" "$watch" "clients: the job"
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/clients"
  cp "$dir"/*.json "$dir"/*.log "$OUT/clients/" 2>/dev/null || true
fi
