"""What the GPUs say, through nvidia-smi where there is one (NVML's command-line face);
on a machine without GPUs every function answers "unknown" rather than failing."""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Sequence

from tuner.errors import UsageError


def parse_gpus(text: str) -> tuple[int, ...]:
    """'0' or '0,1' -> distinct GPU ids; ``UsageError`` otherwise."""
    try:
        gpus = tuple(int(g) for g in text.split(",") if g.strip() != "")
    except ValueError:
        raise UsageError(f"--gpus takes GPU ids like 0 or 0,1, not {text!r}") from None
    if not gpus or len(set(gpus)) != len(gpus):
        raise UsageError(f"--gpus takes distinct GPU ids like 0 or 0,1, not {text!r}")
    check_ids(gpus, indices())
    return gpus


def check_ids(gpus: Sequence[int], known: Sequence[int] | None) -> None:
    """GPU ids must be ones nvidia-smi lists (``known``) or, without it, 0..63."""
    allowed = list(known) if known is not None else list(range(64))
    bad = [g for g in gpus if g not in allowed]
    if bad:
        where = (f"this host's GPUs are {','.join(map(str, allowed)) or 'none'} (nvidia-smi)"
                 if known is not None else "GPU ids are 0..63")
        raise UsageError(f"--gpus {','.join(map(str, bad))}: no such GPU; {where}")


# nvidia-smi answers in well under a second; one that hangs (a wedged driver) must not
# hold a trial or a launch for long.
SMI_TIMEOUT_S = 20


def smi(*args: str) -> list[str] | None:
    """nvidia-smi's non-empty output lines, or None where it is missing or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True,
                             timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def indices() -> list[int] | None:
    """The ids of the GPUs nvidia-smi lists; None where there is no nvidia-smi."""
    lines = smi("--query-gpu=index", "--format=csv,noheader")
    return None if lines is None else [int(x) for x in lines if x.isdigit()]


def available() -> bool:
    return smi("-L") is not None


def name(gpu: int) -> str | None:
    lines = smi("--query-gpu=name", "--format=csv,noheader", "-i", str(gpu))
    return lines[0] if lines else None


def used_mib(gpus: Sequence[int]) -> int | None:
    ids = ",".join(str(g) for g in gpus)
    lines = smi("--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", ids)
    return sum(int(float(x)) for x in lines) if lines else None


def compute_pids(gpus: Sequence[int]) -> list[int] | None:
    """Processes holding memory on these GPUs; None when that cannot be known."""
    uuids = smi("--query-gpu=uuid", "--format=csv,noheader", "-i",
                 ",".join(str(g) for g in gpus))
    apps = smi("--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader")
    if uuids is None or apps is None:
        return None
    pids = []
    for line in apps:
        uuid, _, pid = line.partition(",")
        if uuid.strip() in uuids and pid.strip().isdigit():
            pids.append(int(pid))
    return pids


def wait_released(gpus: Sequence[int], baseline_mib: int | None, timeout_s: float = 60.0,
                  slack_mib: int = 1024) -> float | None:
    """Seconds until the GPUs' memory is back to ``baseline_mib`` (+ slack) and no compute
    process holds them; None where there is no GPU to ask."""
    if not available():
        return None
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        used = used_mib(gpus)
        pids = compute_pids(gpus) or []
        if used is not None and not pids and (baseline_mib is None or
                                              used <= baseline_mib + slack_mib):
            return time.monotonic() - start
        time.sleep(0.2)
    return time.monotonic() - start
