"""Files and folders that really refuse writes, for tests, also when they run as root.

Root ignores permission bits, so as root the path is made immutable (``chattr +i``, which
ext4, xfs and btrfs honour); otherwise its write bits are cleared. ``read_only`` yields
None when writes were refused, else why not (the test then skips).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[str | None]:
    """Within the block writes to ``path`` (a file, or a new file in a folder) fail."""
    as_root = os.geteuid() == 0
    if as_root:
        why = _chattr("+i", path)
    else:
        mode = path.stat().st_mode
        path.chmod(mode & ~0o222)
        why = None
    try:
        yield why or (None if _refused(path) else f"writes to {path} still succeed")
    finally:
        if as_root:
            _chattr("-i", path)
        else:
            path.chmod(mode)


def _chattr(flag: str, path: Path) -> str | None:
    if shutil.which("chattr") is None:
        return "no chattr to make a path read-only as root"
    done = subprocess.run(["chattr", flag, str(path)], capture_output=True, text=True)
    return None if done.returncode == 0 else f"chattr {flag}: {done.stderr.strip()}"


def _refused(path: Path) -> bool:
    try:
        if path.is_dir():
            with tempfile.TemporaryFile(dir=path):
                pass
        else:
            with open(path, "ab"):
                pass
    except OSError:
        return True
    return False
