"""`search.reference_runs`: a worker that starts on a study whose default is measured runs
the default again first, launched (real `tuner worker` processes, the simulated server),
and `tuner status` sets that run beside the default."""

import json
import os
import subprocess
import sys

import pytest

from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.sim_studies import SIM
from tuner.testing.worker_procs import start_worker
from tuner.trials import from_frozen, record


def _worker(url, tmp_path, n, log):
    proc = start_worker("ref", url, "0", "--n-trials", str(n),
                        env={"TUNER_HOME": str(tmp_path)}, log=tmp_path / log)
    assert proc.wait(timeout=240) == 0, (tmp_path / log).read_text()[-3000:]
    return (tmp_path / log).read_text()


def _records(url):
    return [from_frozen(t) for t in open_study("ref", url).study.get_trials(deepcopy=False)]


def test_a_later_worker_runs_the_default_again_and_status_shows_it(storage_url, study_file,
                                                                   tmp_path):
    text = SIM.format(n=24, trials=8, scale=1).replace("[search]\n",
                                                       "[search]\nreference_runs = true\n")
    create_study(load_study_file(study_file(text, "ref.toml")), storage_url)

    first = _worker(storage_url, tmp_path, 3, "w1.log")  # the three baselines
    assert "reference run" not in first  # the default is not measured yet: nothing to repeat
    before = _records(storage_url)
    default = next(r for r in before if r.baseline == record.DEFAULT_BASELINE)
    assert default.measured

    second = _worker(storage_url, tmp_path, 1, "w2.log")
    assert f"queued a reference run of the default (trial {default.number})" in second
    after = _records(storage_url)
    (ref,) = [r for r in after if r.baseline == record.REFERENCE_BASELINE]
    assert ref.measured and ref.number == len(before)  # this worker's first trial: none queued
    assert dict(ref.flags) == dict(default.flags) and dict(ref.launch) == dict(default.launch)
    assert ref.command and ref.worker != default.worker  # launched, not a duplicate's copy
    assert ref.metrics != default.metrics  # its own measurement

    env = {**os.environ, "TUNER_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "tuner", "status", "ref", "--storage",
                          storage_url, "--once"], capture_output=True, text=True, timeout=60,
                         env=env)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("reference:"))
    want = 100 * (ref.metric("output_throughput") - default.metric("output_throughput")) \
        / default.metric("output_throughput")
    assert f"trial {ref.number}" in line and f"vs trial {default.number}" in line
    assert f"output_throughput {want:+.1f}%" in line
    js = subprocess.run([sys.executable, "-m", "tuner", "status", "ref", "--storage",
                         storage_url, "--json"], capture_output=True, text=True, timeout=60,
                        env=env)
    assert js.returncode == 0, js.stderr
    (run,) = json.loads(js.stdout)["reference_runs"]
    assert run["trial"] == ref.number and run["default_trial"] == default.number
    assert run["change_pct"]["output_throughput"] == pytest.approx(want)
