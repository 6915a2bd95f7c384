# env.sh -- source it on the GPU machine after scripts/gpu/install.sh:  source scripts/gpu/env.sh
# Puts the kit's vLLM, tuner's wheels and the repo on the path, offline and quiet.
SITE=${SITE:-/tmp/site}
_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export PYTHONPATH=$SITE:$_repo${PYTHONPATH:+:$PYTHONPATH}
export PATH=$SITE/bin:$PATH
# REQUIRED: flashinfer is not in the kit; without this vLLM's GPU sampler fails at start.
export VLLM_USE_FLASHINFER_SAMPLER=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
# Keep NVLink multicast off on this workplace's multi-GPU hosts (see the device notes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -x /opt/torch/.venv/bin/python3 ]; then export TUNER_GPU_PY=/opt/torch/.venv/bin/python3
else export TUNER_GPU_PY=python3; fi

# The worker runs only the engine python it is told it may run (docs/deploy.md): the one
# the GPU study files name.
export TUNER_ENGINE_PYTHON=$TUNER_GPU_PY
unset _repo
