"""A 20-trial study on the simulator, run by a real `tuner worker` with the default sampler:
every proposal lies on the space's compile grid (tuner.space.compile_grid), as asked, as
stored and as launched, and every launch meets the study's rules."""

import pytest
from optuna.trial import TrialState

from tuner.space import build_space
from tuner.testing.sim_studies import sim_study, trials_of
from tuner.testing.worker_procs import start_worker
from tuner.trials import record

pytestmark = pytest.mark.integration
TRIALS = 20



def gridded(spec):
    """``spec`` with the compile grid on (``[space] compile_grid = true``)."""
    return spec.model_copy(update={"space": spec.space.model_copy(update={"compile_grid": True})})

def test_every_proposal_of_a_study_is_on_the_compile_grid(study_file, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    spec = sim_study(study_file, url, name="g", n=32, trials=TRIALS, scale=2,
                     extra="\n[space]\ncompile_grid = true\n")
    space = build_space(gridded(spec))
    assert set(space.grids) == {"max_num_batched_tokens", "max_num_seqs", "max_model_len"}
    proc = start_worker("g", url, env={"TUNER_HOME": str(tmp_path)}, log=tmp_path / "w.log")
    assert proc.wait(timeout=600) == 0, (tmp_path / "w.log").read_text()[-3000:]
    done = [t for t in trials_of("g", url) if t.state == TrialState.COMPLETE]
    proposed = [t for t in done if "baseline" not in t.user_attrs]
    assert len(done) >= TRIALS and len(proposed) >= TRIALS - 3
    for t in done:
        launch = t.user_attrs["launch"]
        for name, grid in space.grids.items():
            if name in launch:  # a baseline leaves some flags to vLLM
                assert launch[name] in grid, (t.number, name, launch[name])
    for t in proposed:
        flags = t.user_attrs["flags"]
        for name, grid in space.grids.items():
            assert t.params[name] in grid, (t.number, name, t.params[name])
            if "repaired" not in t.user_attrs:  # as proposed, as stored, as launched
                assert flags[name] == t.params[name]
        if t.user_attrs["outcome"] != record.INFEASIBLE:
            assert space.rules.violations(flags, space.context) == []
