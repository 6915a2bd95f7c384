# kit-ready.sh -- sourced by the GPU scripts that run vLLM alone (profile-starts.sh,
# rate-ladders.sh), with REPO and PARTS set: copies this call's kit part (install.sh),
# exits 3 until vLLM is installed, writes the 8B-shaped model folder MODEL once, and
# sources env.sh.
MODEL=/tmp/llama3-8b-dummy
bash "$REPO/scripts/gpu/install.sh" "$PARTS" /nonexistent 2>&1 | grep -v "wheels of"
PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 /opt/torch/.venv/bin/python3 -c 'import vllm' \
  2>/dev/null || { echo "vLLM not installed yet"; exit 3; }
[ -f "$MODEL/config.json" ] || /opt/torch/.venv/bin/python3 /tmp/vllm-kit-work/vllm-kit/make_model.py \
  "$MODEL" --shape 8b --verify
source "$REPO/scripts/gpu/env.sh"
