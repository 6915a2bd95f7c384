#!/usr/bin/env bash
# install.sh -- make the offline GPU machine ready for tuner: vLLM 0.24.0 from the kit,
# tuner's missing dependencies from .whl, and the Llama-3-8B-shaped model folder.
#
# Usage (on the GPU machine, in the repo root):
#   bash scripts/gpu/install.sh [PARTS_FROM] [WHEELS_FROM]
#     PARTS_FROM   folder with some or all of part00..part03, SHA256SUMS, install-on-device.sh
#                  (default .kit/parts, as built by build-kit.sh and carried here)
#     WHEELS_FROM  folder with the wheels of scripts/gpu/download-wheels.sh (default .whl)
# Env: KIT (default /root/kit) collects the parts across calls; SITE (default /tmp/site)
#      is the pip --target folder; MODEL (default /tmp/llama3-8b-dummy); SHAPE (8b or 70b);
#      PY (default /opt/torch/.venv/bin/python3 if present, else python3).
#
# The parts can arrive one call at a time (each call carries at most 64 MiB): every run
# copies the parts it finds into $KIT and, until all of them are there, stops with exit
# code 3 naming the ones still missing. Each step is skipped when already done, so the
# script can run at the start of every call. Then, in the same shell: source scripts/gpu/env.sh
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
PARTS_FROM=${1:-$REPO/.kit/parts}
WHEELS_FROM=${2:-$REPO/.whl}
KIT=${KIT:-/root/kit}
SITE=${SITE:-/tmp/site}
SHAPE=${SHAPE:-8b}
MODEL=${MODEL:-/tmp/llama3-$SHAPE-dummy}
if [ -z "${PY:-}" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then PY=/opt/torch/.venv/bin/python3; else PY=python3; fi
fi
WORK=${WORK:-/tmp/vllm-kit-work}
export WORK
die() { echo "install: ERROR: $*" >&2; exit 1; }
say() { echo "install: $*"; }
start=$SECONDS

# ---- 1. collect the kit's parts -------------------------------------------------------
mkdir -p "$KIT"
if [ -d "$PARTS_FROM" ]; then
  for f in "$PARTS_FROM"/part[0-9][0-9] "$PARTS_FROM"/SHA256SUMS "$PARTS_FROM"/install-on-device.sh; do
    [ -f "$f" ] || continue
    if ! cmp -s "$f" "$KIT/$(basename "$f")"; then
      cp "$f" "$KIT/" && say "copied $(basename "$f") into $KIT"
    fi
  done
fi
[ -f "$KIT/SHA256SUMS" ] && [ -f "$KIT/install-on-device.sh" ] \
  || die "$KIT has no SHA256SUMS or install-on-device.sh: carry .kit/parts/SHA256SUMS and .kit/parts/install-on-device.sh"

# ---- 2. vLLM from the kit into $SITE --------------------------------------------------
vllm_ok() { PYTHONPATH=$SITE VLLM_USE_FLASHINFER_SAMPLER=0 "$PY" -c 'import vllm' >/dev/null 2>&1; }
if [ -f "$SITE/.vllm-kit-target" ] && vllm_ok; then
  say "vLLM already installed in $SITE"
else
  missing=""
  for p in $(awk '{n=$2; sub(/^\*/, "", n); print n}' "$KIT/SHA256SUMS" | grep -E '^part[0-9]+$'); do
    if [ ! -f "$KIT/$p" ] || ! (cd "$KIT" && grep -E " \*?$p\$" SHA256SUMS | sha256sum -c --quiet - >/dev/null 2>&1); then
      rm -f "$KIT/$p"
      missing="$missing $p"
    fi
  done
  if [ -n "$missing" ]; then
    say "waiting for parts:$missing (carry them in .kit/parts/ on the next call)"
    exit 3
  fi
  say "all parts here; installing vLLM into $SITE (under a minute) ..."
  PY=$PY bash "$KIT/install-on-device.sh" "$KIT" "$SITE" | grep -E '^\[|wheels OK|^vllm |^Python' \
    || die "install-on-device.sh failed"
  vllm_ok || die "vllm does not import from $SITE"
fi

# ---- 3. tuner's missing dependencies into $SITE ---------------------------------------
SUMS=$REPO/scripts/gpu/wheels.sha256
want=$(cat "$SUMS")
if [ "$(cat "$SITE/.tuner-wheels" 2>/dev/null)" = "$want" ]; then
  say "tuner's wheels already installed"
else
  (cd "$WHEELS_FROM" 2>/dev/null && sha256sum -c --quiet "$SUMS") \
    || die "the wheels of $SUMS are not all in $WHEELS_FROM: carry .whl (bash scripts/gpu/download-wheels.sh builds it)"
  say "installing $(wc -l < "$SUMS") wheels into $SITE ..."
  (cd "$WHEELS_FROM" && "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target "$SITE" $(awk '{print $2}' "$SUMS")) || die "pip install of the wheels failed"
  echo "$want" > "$SITE/.tuner-wheels"
fi

# ---- 4. the model folder --------------------------------------------------------------
if [ -f "$MODEL/config.json" ] && [ -f "$MODEL/tokenizer.json" ]; then
  say "model folder $MODEL already there"
elif [ -f "$WORK/vllm-kit/make_model.py" ]; then
  "$PY" "$WORK/vllm-kit/make_model.py" "$MODEL" --shape "$SHAPE" --verify || die "make_model.py failed"
else  # the kit's work folder is gone: tuner writes the same bytes
  PYTHONPATH=$REPO "$PY" -c "import sys; from tuner.modelfolder import write_llama_shape; \
print(write_llama_shape(sys.argv[1], sys.argv[2]))" "$MODEL" "$SHAPE" || die "could not write $MODEL"
fi

# ---- 5. check -------------------------------------------------------------------------
PYTHONPATH=$SITE:$REPO VLLM_USE_FLASHINFER_SAMPLER=0 "$PY" - <<'PYEOF' || die "an import failed (see above)"
import importlib.metadata as m
import aiohttp, numpy, optuna, pydantic, sqlalchemy, vllm, yaml  # noqa: F401
import tuner  # noqa: F401
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return "?"
print("install: imports OK: " + ", ".join(
    f"{n} {version(n)}" for n in ("vllm", "torch", "optuna", "sqlalchemy", "aiohttp",
                                   "pydantic", "numpy", "PyYAML")))
PYEOF
say "ready in $((SECONDS - start)) s; now: source scripts/gpu/env.sh"
