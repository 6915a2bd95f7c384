"""The test helpers that stop workers: one that outlives its signal fails the test with
where it is (its stacks, asked with SIGUSR1) and its log, not a bare time-out."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tuner.testing.cli_fork import default_sigint
from tuner.testing.worker_procs import interrupt, stop, wait_for

# Ignores Ctrl-C and SIGTERM, and answers SIGUSR1 with its stack, as a stuck worker would
STUCK = """
import faulthandler, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
print("ready", flush=True)
def stuck_here():
    while True:
        time.sleep(0.1)
stuck_here()
"""


def _stuck(tmp_path):
    log = tmp_path / "w.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", STUCK], stdout=out,
                                stderr=subprocess.STDOUT)
    assert wait_for(lambda: "ready" in log.read_text(), 30)
    return proc, log


@pytest.mark.parametrize("how", ["interrupt", "stop"])
def test_a_worker_that_outlives_its_signal_fails_with_its_stacks(tmp_path, how):
    proc, log = _stuck(tmp_path)
    try:
        with pytest.raises(AssertionError, match="did not stop within 2 s") as failed:
            if how == "interrupt":
                interrupt(proc, signal.SIGINT, timeout_s=2, log=log)
            else:
                stop(proc.pid, log, signal.SIGTERM, timeout_s=2)
        assert "in stuck_here" in str(failed.value)
        assert proc.poll() is None  # asked where it is, not killed
    finally:
        proc.kill()
        proc.wait()


def test_interrupt_returns_the_exit_code_of_a_worker_that_stops(tmp_path):
    # SIGINT as a worker gets it (start_worker): the test process may run with it ignored
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); "
                             "time.sleep(60)"], stdout=subprocess.PIPE, preexec_fn=default_sigint)
    assert proc.stdout.readline().strip() == b"ready"
    # Python ends an uncaught KeyboardInterrupt by dying of the signal
    assert interrupt(proc, signal.SIGINT, timeout_s=30) == -signal.SIGINT
    proc.stdout.close()
