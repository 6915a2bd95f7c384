"""Baselines survive (issue 63, point 4): a real `tuner worker` queues vLLM's defaults again
after a run that measured its own client, not the server (on the simulator, with a lag
limit no client meets), as they were launched."""

from __future__ import annotations

from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.worker_procs import start_worker
from tuner.trials import load_records, record
from tuner.trials.parts import FailureKind

from tests.integration.test_invalid_measurement import STUDY


def test_a_worker_queues_the_default_again_after_a_starved_client(study_file, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    create_study(load_study_file(study_file(STUDY.replace("baselines = false",
                                                          "baselines = true"))), url)
    log = tmp_path / "worker.log"
    proc = start_worker("s", url, env={"TUNER_HOME": str(tmp_path)}, log=log)
    assert proc.wait(timeout=300) == 0, log.read_text()[-2000:]
    defaults = [r for r in load_records(open_study("s", url).study)
                if r.baseline == record.DEFAULT_BASELINE]
    # baselines 0-2 queued at creation run first; the default again after each failure,
    # as it was launched: the worker stops after five invalid runs in a row (0 to 4)
    assert [(r.number, r.state) for r in defaults] == [
        (0, record.FAIL), (3, record.FAIL), (6, record.WAITING)], log.read_text()[-2000:]
    assert all(r.failure.kind == FailureKind.INVALID_MEASUREMENT for r in defaults[:2])
    assert all(dict(r.flags) == dict(defaults[0].flags) for r in defaults)
    assert "queued the default baseline again (trial 0: invalid-measurement" in log.read_text()
