#!/usr/bin/env bash
# memory-probe.sh -- on the GPU machine (after install.sh): start `vllm serve` with DEBUG
# logging for a few configurations, only until vLLM has sized its KV cache, and keep the
# memory-profiling lines (weights, torch peak increase, non-torch, CUDA-graph estimate).
#   bash scripts/gpu/memory-probe.sh NAME "FLAGS" [NAME "FLAGS" ...]     (logs into $OUT)
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/gpu/env.sh
out=${OUT:-/tmp/memory-probe}; mkdir -p "$out"
while [ $# -ge 2 ]; do
  name=$1 flags=$2; shift 2
  log=$out/probe-$name.log
  VLLM_LOGGING_LEVEL=DEBUG "$TUNER_GPU_PY" -m vllm.entrypoints.openai.api_server \
    --model /tmp/llama3-8b-dummy --load-format dummy --port 8011 $flags > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 90); do grep -q "GPU KV cache size" "$log" && break; sleep 1; done
  kill -INT $pid 2>/dev/null; sleep 4
  pkill -9 -f "vllm.entrypoints" 2>/dev/null; pkill -9 -f EngineCore 2>/dev/null; sleep 2
  echo "== $name: $flags"
  grep -E "Model loading took|memory snapshot|requested memory|Initial free memory|Free memory after|MemoryProfilingResult|torch_peak|non_torch|Available KV cache|GPU KV cache size|Graph capturing|cudagraph|CUDA graph" "$log" | cut -c1-400
done
