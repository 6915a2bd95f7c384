"""The search benchmark's cache key (``search_truth.model_version``) of the simulator source
at git revisions, to show that an edit kept the key (``bench/results/*.json``'s "simulator").

    .venv/bin/python bench/model_version_at.py main HEAD

prints, per revision, the key and the byte hash of the same files (the key before it left
docstrings and comments out). The working tree counts as revision ``.``.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_truth  # noqa: E402


def checkout(rev: str, into: Path) -> Path:
    """The files ``MODEL_SOURCES`` names, as they are at ``rev`` (``.``: the working tree)."""
    if rev == ".":
        return search_truth.ROOT
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", "tuner/"],
                           cwd=search_truth.ROOT, check=True, capture_output=True,
                           text=True).stdout.split()
    for name in names:
        if any(Path(name).match(p) for p in search_truth.MODEL_SOURCES):
            blob = subprocess.run(["git", "show", f"{rev}:{name}"], cwd=search_truth.ROOT,
                                  check=True, capture_output=True).stdout
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).write_bytes(blob)
    return into


def byte_hash(root: Path) -> str:
    h = hashlib.sha256()
    for pattern in search_truth.MODEL_SOURCES:
        for path in sorted(root.glob(pattern)):
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("revs", nargs="+", help="git revisions; '.' is the working tree")
    home = search_truth.ROOT
    for rev in ap.parse_args().revs:
        with tempfile.TemporaryDirectory() as tmp:
            search_truth.ROOT = checkout(rev, Path(tmp))
            try:
                print(f"{rev}: key {search_truth.model_version()}, "
                      f"bytes {byte_hash(search_truth.ROOT)}")
            finally:
                search_truth.ROOT = home


if __name__ == "__main__":
    main()
