"""Eight workers on one PostgreSQL study, started together (real `tuner worker` processes,
eight simulated servers, real HTTP): every trial is recorded once, and trials that ran at
the same time never ran the same flags (the sampler sees running trials: constant liar).

The machine has two cores: the workload is tiny (8 requests of 64/8 tokens)."""

import collections
import itertools

import pytest
from optuna.trial import TrialState

from tuner.storage import open_study
from tuner.testing.sim_studies import SIM
from tuner.testing.worker_procs import ServerWatcher, start_worker
from tuner.trials import record

WORKERS = 8
TRIALS = 24


def _tiny(n_trials: int) -> str:
    return (SIM.format(n=8, trials=n_trials, scale=1)
            .replace("input_len = 256", "input_len = 64")
            .replace("output_len = 32", "output_len = 8")
            .replace("max_concurrency = 16", "max_concurrency = 4")
            .replace("warmup_requests = 2", "warmup_requests = 1"))


def _overlap(a, b) -> bool:
    return a.datetime_start < b.datetime_complete and b.datetime_start < a.datetime_complete


@pytest.mark.slow
def test_eight_workers_record_every_trial_once_and_run_distinct_flags(pg_admin, study_file,
                                                                      tmp_path):
    from tuner.storage import create_study, load_study_file
    from tuner.testing.databases import fresh_postgres

    with fresh_postgres() as url:
        create_study(load_study_file(study_file(_tiny(TRIALS), "many.toml")), url)
        env = {"TUNER_HOME": str(tmp_path)}
        procs = [start_worker("many", url, str(g), env=env, log=tmp_path / f"w{g}.log")
                 for g in range(WORKERS)]
        with ServerWatcher([p.pid for p in procs]) as watcher:
            for g, p in enumerate(procs):
                assert p.wait(timeout=400) == 0, (tmp_path / f"w{g}.log").read_text()[-3000:]
        study = open_study("many", url).study
        trials = study.get_trials(deepcopy=False)
        workers = [k for k in study.user_attrs if k.startswith("tuner.worker.")]

    assert all(t.state in (TrialState.COMPLETE, TrialState.FAIL) for t in trials)
    assert sorted(t.number for t in trials) == list(range(len(trials)))
    assert all("outcome" in t.user_attrs for t in trials)
    launched = [t for t in trials if t.user_attrs["outcome"] != record.DUPLICATE
                and t.user_attrs.get("command")]
    # each server that ran is exactly one recorded trial
    servers = sorted(map(tuple, watcher.servers()))
    recorded = sorted(tuple(t.user_attrs["command"]) for t in launched)
    assert servers == recorded, _unmatched(servers, launched)
    counted = [t for t in trials if t.user_attrs["outcome"] != record.DUPLICATE]
    assert TRIALS <= len(counted) <= TRIALS + WORKERS - 1  # workers that asked together
    assert len({t.user_attrs["worker"] for t in trials}) == WORKERS
    assert len(workers) == WORKERS

    # trials that ran at the same time ran different flags, start-up and model-based alike
    ran = [t for t in counted if t.datetime_complete is not None]
    pairs = [(a, b) for a, b in itertools.combinations(ran, 2) if _overlap(a, b)]
    assert len(pairs) >= WORKERS  # the workers did run side by side
    same = [(a.number, b.number) for a, b in pairs
            if record.flags_key(a.user_attrs["flags"]) == record.flags_key(b.user_attrs["flags"])]
    assert same == []
    # past the random start-up trials the sampler still proposed many configurations
    model_based = [t for t in ran if t.number >= 3 + 8]
    assert len({record.flags_key(t.user_attrs["flags"]) for t in model_based}) >= \
        len(model_based) - 2


def _unmatched(servers, launched) -> str:
    """What differs between the servers seen and the trials recorded: each server no trial
    names, and each trial (number, worker, state, outcome, failure) whose server was not
    seen or was seen a number of times other than once."""
    seen = collections.Counter(servers)
    named = collections.Counter(tuple(t.user_attrs["command"]) for t in launched)
    lines = [f"server seen {n}x, recorded {named[c]}x: port {c[c.index('--port') + 1]}"
             for c, n in seen.items() if named[c] != n]
    lines += [f"trial {t.number} ({t.user_attrs.get('worker')}, {t.state.name}, "
              f"{t.user_attrs.get('outcome')}, {t.user_attrs.get('failure')}) seen "
              f"{seen[tuple(t.user_attrs['command'])]}x" for t in launched
              if seen[tuple(t.user_attrs["command"])] != named[tuple(t.user_attrs["command"])]]
    return "\n".join(lines)
