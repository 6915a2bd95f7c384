#!/usr/bin/env bash
# download-wheels.sh -- tuner's runtime dependencies that the GPU machine lacks, as wheels.
#
# Usage:  bash scripts/gpu/download-wheels.sh [OUTDIR]      (default: REPO/.whl, ignored)
#
# The GPU machine (Python 3.12, no internet) already has numpy, pyyaml, tqdm, packaging,
# typing-extensions, MarkupSafe and aiohttp with its dependencies; the vLLM kit brings
# pydantic 2.14.4 (+ pydantic-core, annotated-types, typing-inspection). What is left is
# Optuna and its storage stack, pinned with PyPI's sha256 in wheels.sha256 next to this
# script: optuna, alembic, colorlog, sqlalchemy, mako (about 5.4 MiB). greenlet is left out:
# SQLAlchemy 2.1 needs it only for asyncio, which tuner does not use.
# Running it again keeps wheels that already match. Any mismatch stops it.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HERE/../../.whl}
SUMS=$HERE/wheels.sha256
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

REQS=$(mktemp)
trap 'rm -f "$REQS"' EXIT
while read -r sha file; do
  if [ -f "$OUT/$file" ] && [ "$(sha256sum < "$OUT/$file" | cut -d' ' -f1)" = "$sha" ]; then
    continue
  fi
  name=${file%%-*}; rest=${file#*-}; version=${rest%%-*}   # NAME-VERSION-TAGS.whl
  echo "$name==$version --hash=sha256:$sha" >> "$REQS"
done < "$SUMS"

if [ -s "$REQS" ]; then
  echo "download-wheels: fetching $(wc -l < "$REQS") wheels for CPython 3.12 into $OUT ..."
  # PyPI only: no local wheel folders, extra indexes or constraints from this machine.
  env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_NO_INDEX \
      -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null \
    python3 -m pip download -q --no-deps --only-binary=:all: --no-cache-dir \
      --index-url https://pypi.org/simple \
      --python-version 3.12 --implementation cp --abi cp312 --abi none --abi abi3 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform any \
      --require-hashes -r "$REQS" -d "$OUT"
fi
(cd "$OUT" && sha256sum -c --quiet "$SUMS") || { echo "ERROR: a wheel in $OUT does not match $SUMS" >&2; exit 1; }
extra=$(comm -13 <(awk '{print $2}' "$SUMS" | LC_ALL=C sort) <(ls "$OUT" | LC_ALL=C sort))
[ -z "$extra" ] || { echo "ERROR: files in $OUT not in $SUMS (two versions stop the install): $extra" >&2; exit 1; }
echo "download-wheels: $(wc -l < "$SUMS") wheels, $(du -sh "$OUT" | cut -f1) in $OUT"
