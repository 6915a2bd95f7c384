"""The installed vLLM's answer (its flags and defaults) asked once per test session and
handed to every study that runs on it, for tests whose subject is not the asking.

Asking the vLLM CPU build costs seconds of both cores (it imports vLLM to print
``vllm serve --help=all``), and a study's own cache ($TUNER_HOME/studies/NAME/engine,
keyed by vLLM's version) helps only the tests of that one study name. ``share_answer``
asks the engine through that same cache, kept in a folder that all of a session's
pytest-xdist workers share (under a file lock, so it is asked once), and copies the answer
into the study's own folder. The worker, the CLI and the sampler then read it as they read
any cached answer; the version is still asked of the installed engine each time.
"""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

from tuner.installed.probe import ProbeError, cached_vllm
from tuner.spec import StudySpec
from tuner.storage.database import study_dir


def share_answer(spec: StudySpec, shared: Path) -> None:
    """Put the answer of ``spec``'s vLLM in its study folder, asked at most once into
    ``shared`` (a folder the session's processes share). Nothing for the simulator, nor
    where the engine cannot be asked (the study then says so itself, as without this)."""
    if spec.engine.kind != "vllm":
        return
    shared.mkdir(parents=True, exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one asks; the others then read its answer
        try:
            cached_vllm(spec.engine.python, shared, spec.engine.env,
                        spec.model.tensor_parallel_size)
        except ProbeError:
            return
    own = study_dir(spec.name) / "engine"
    own.mkdir(parents=True, exist_ok=True)
    for answer in shared.glob("vllm-*.json"):
        shutil.copy(answer, own / answer.name)
