"""Part 6 of issue 46, "the first hour at the CLI": what tripped a new user running the
README's commands on the simulator. Real `tuner` processes (or the CLI in-process where no
worker runs) over real SQLite and PostgreSQL storages."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

from sqlalchemy.engine import make_url

from tuner.testing.cli_fork import run_tuner

SIM = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 64
output_len = 8
max_concurrency = 4
num_requests = 16
warmup_requests = 0
max_client_lag_ms = 10000
min_gap_share = 0.0
[search]
n_trials = {trials}
baselines = false
[engine]
kind = "sim"
time_scale = 100
start_timeout_s = 60
'''


def tuner(env: dict, cwd, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return run_tuner(args, env=env, cwd=cwd, timeout=timeout)


def _env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_STORAGE")}
    return {**env, "TUNER_HOME": str(tmp_path / "home"), "TUNER_HEARTBEAT_S": "1"}


def test_launch_hints_repeat_the_storage_and_status_names_it(study_file, tmp_path):
    """Seen: after `tuner launch S --storage URL` the hint `tuner status S`, run as given,
    showed another study S in the default storage."""
    env = _env(tmp_path)
    path = study_file(SIM.format(trials=2), "s.toml")
    url = f"sqlite:///{tmp_path}/elsewhere.db"
    assert tuner(env, tmp_path, "study", "create", path).returncode == 0  # the default one
    assert tuner(env, tmp_path, "study", "create", path, "--storage", url).returncode == 0
    out = tuner(env, tmp_path, "launch", "s", "--storage", url, "--gpus", "0")
    assert out.returncode == 0, out.stderr
    try:
        hint = re.search(r"`(tuner status s[^`]*)` to watch", out.stderr)
        assert hint and "--storage" in hint.group(1), out.stderr
        assert f"`tuner stop s --storage {url}` to stop" in out.stderr
        shown = tuner(env, tmp_path, *shlex.split(hint.group(1))[1:], "--once")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[0] == f"storage: {url} (from --storage)", shown.stdout
        assert "1 live worker" in shown.stdout or "trials spent" in shown.stdout
        plain = tuner(env, tmp_path, "status", "s", "--once")  # the default storage's study
        default = f"sqlite:///{tmp_path / 'home' / 'tuner.db'}"
        assert plain.stdout.splitlines()[0] == f"storage: {default} (from the default)"
    finally:
        stopped = tuner(env, tmp_path, "stop", "s", "--storage", url, "--now")
        assert stopped.returncode == 0, stopped.stderr


def test_status_names_a_postgres_storage_without_its_password(storage_url, study_file,
                                                              tmp_path):
    if storage_url.startswith("postgresql"):  # trust authentication ignores the password
        storage_url = make_url(storage_url).set(password="s3cret").render_as_string(
            hide_password=False)
    env = _env(tmp_path)
    path = study_file(SIM.format(trials=2), "s.toml")
    assert tuner(env, tmp_path, "study", "create", path, "--storage",
                 storage_url).returncode == 0
    shown = tuner(env, tmp_path, "status", "s", "--once", "--storage", storage_url)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("storage: ") and "s3cret" not in shown.stdout
    if "s3cret" in storage_url:
        assert ":***@" in shown.stdout.splitlines()[0], shown.stdout


def test_a_hint_never_prints_a_password():
    from tuner.cli.study import again

    url = "postgresql+psycopg://me:s3cret@db.example/tuner"
    hint = again("tuner status s", url, url)
    assert "s3cret" not in hint and "export TUNER_STORAGE" in hint
    assert again("tuner status s", "@/run/url", url) == "`tuner status s --storage @/run/url`"
    assert again("tuner status s", None, url) == "`tuner status s`"  # the environment's


def test_a_resumed_worker_counts_the_studys_trials(study_file, tmp_path):
    """Seen: a second worker's progress line began at [1/...] though trials were spent."""
    from tuner.storage import create_study, load_study_file
    from tuner.testing.worker_procs import start_worker

    url = f"sqlite:///{tmp_path}/t.db"
    create_study(load_study_file(study_file(SIM.format(trials=3))), url)
    env = {"TUNER_HOME": str(tmp_path / "home")}
    for k in (1, 2):
        log = tmp_path / f"worker{k}.log"
        proc = start_worker("s", url, "0", "--n-trials", "1", env=env, log=log)
        assert proc.wait(timeout=300) == 0, log.read_text()[-2000:]
    first, second = ((tmp_path / f"worker{k}.log").read_text() for k in (1, 2))
    assert re.search(r"^\[1/3\] trial 0: ", first, re.M), first
    assert re.search(r"^\[2/3\] trial 1: ", second, re.M), second
    assert not re.search(r"^\[1/", second, re.M), second


def test_best_says_when_the_studys_slo_overrides_a_looser_limit(storage_url, run_cli):
    """Seen: `tuner best --max-itl-p99 X`, X looser than the SLO, was silently capped."""
    from tuner.testing.studies import make_study

    make_study(storage_url, "mixed", n=14, name="mixed")  # SLO p99_itl_ms <= 150
    code, out, err = run_cli("best", "mixed", "--storage", storage_url, "--max-itl-p99", "400")
    assert code == 0, err
    assert ("--max-itl-p99 400 is looser than the study's SLO p99_itl_ms <= 150, which "
            "applies") in err, err
    code, out, err = run_cli("best", "mixed", "--storage", storage_url, "--format", "json",
                             "--max-itl-p99", "400")
    assert code == 0 and "--max-itl-p99 400 is looser" in json.loads(out)["limits_note"]
    code, out, err = run_cli("best", "mixed", "--storage", storage_url, "--max-itl-p99", "100")
    assert code == 0 and "looser" not in err + out  # a tighter limit is simply applied


def test_a_misspelt_key_gets_the_nearest_valid_one(study_file, run_cli, tmp_path):
    """Seen: a typo got only "remove it or check its spelling"."""
    path = study_file('[model]\npath = "models/llama3-8b"\n[workload]\nmax_concurency = 8\n',
                      "typo.toml")
    code, out, err = run_cli("study", "create", path, "--storage", f"sqlite:///{tmp_path}/x.db")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "'workload.max_concurency'" in line and "did you mean 'max_concurrency'?" in line
    path = study_file('[model]\npath = "models/llama3-8b"\nzzz = 1\n', "far.toml")
    code, _, err = run_cli("study", "create", path, "--storage", f"sqlite:///{tmp_path}/x.db")
    assert code == 2 and "'model.zzz'" in err and "did you mean" not in err


def test_study_create_on_an_edited_file_applies_the_budget_and_refuses_the_rest(
        storage_url, study_file, run_cli):
    """Seen: a new n_trials or [slo] limit answered "exists, unchanged" (exit 0) and kept
    the old values. Also seen: nothing said the name came from the file's name."""
    from tuner.storage import open_study
    from tuner.spec.changes import Change

    path = study_file(SIM.format(trials=2), "s.toml")
    code, out, err = run_cli("study", "create", path, "--storage", storage_url)
    assert code == 0, err
    assert out.startswith("study s created in "), out
    assert 'name s: from the file name (s.toml); set name = "..." in the file' in out, out
    path.write_text(SIM.format(trials=5))
    code, out, err = run_cli("study", "create", path, "--storage", storage_url)
    assert code == 0, err
    assert " updated in " in out and "changed: search.n_trials 2 -> 5" in out, out
    assert open_study("s", storage_url).spec.search.n_trials == 5
    code, out, err = run_cli("study", "create", path, "--storage", storage_url)
    assert code == 0 and " exists, unchanged in " in out and "changed:" not in out, out
    path.write_text(SIM.format(trials=5) + "crosscheck_repeats = 3\n")  # in [engine]
    code, out, err = run_cli("study", "create", path, "--storage", storage_url)
    assert code == 0 and "changed: engine.crosscheck_repeats 1 -> 3" in out, (out, err)
    assert open_study("s", storage_url).spec.engine.crosscheck_repeats == 3

    path.write_text(SIM.format(trials=5) + "crosscheck_repeats = 3\n[slo]\np99_itl_ms = 40\n")
    code, out, err = run_cli("study", "create", path, "--storage", storage_url)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "with another slo.p99_itl_ms: None stored, the file has 40.0;" in line, line
    assert 'set name = "..."' in line
    token = Change("engine.env.HF_TOKEN", "hf_s3cret", "hf_other")  # (sim takes no env)
    assert "s3cret" not in str(token) + token.values("stored, the file has")
    assert open_study("s", storage_url).spec.slo.p99_itl_ms is None  # nothing applied

    named = study_file('name = "t"\n' + SIM.format(trials=2), "other.toml")
    code, out, err = run_cli("study", "create", named, "--storage", storage_url)
    assert code == 0 and out.startswith("study t created in ") and "file name" not in out


def test_the_template_filled_in_makes_a_study(tmp_path, run_cli):
    """Seen: every example named one GPU box's paths (/opt/torch/..., /tmp/site); the
    template names none, and filled in, it is a study `tuner study create` accepts."""
    import shutil

    from tuner.testing.examples import STUDIES_DIR, TEMPLATE, fill_template

    text = TEMPLATE.read_text()
    assert set(re.findall(r"<([A-Z_]+)>", text)) == {"MODEL_FOLDER", "GPU", "VLLM_PYTHON"}
    assert "/opt/" not in text and "/tmp/" not in text
    unfilled = tmp_path / "unfilled.toml"
    unfilled.write_text(text)
    code, out, err = run_cli("study", "create", unfilled, "--storage",
                             f"sqlite:///{tmp_path}/x.db")
    assert code == 2 and "<GPU>" in err and len(err.strip().splitlines()) == 1, err

    model = tmp_path / "my-model"
    shutil.copytree(STUDIES_DIR / "models" / "llama3-8b", model)
    path = tmp_path / "my-model.toml"
    path.write_text(fill_template({"MODEL_FOLDER": str(model), "GPU": "h100",
                                   "VLLM_PYTHON": sys.executable}))
    code, out, err = run_cli("study", "create", path, "--storage", f"sqlite:///{tmp_path}/x.db")
    assert code == 0, err
    assert out.startswith("study my-model created in ") and "3 baselines queued" in out, out
    # a capacity study: its TTFT and ITL limits, and no objectives named (issue 63)
    from tuner.storage import open_study

    spec = open_study("my-model", f"sqlite:///{tmp_path}/x.db").spec
    assert spec.measures_capacity and spec.capacity.reference_rate
    assert [o.metric for o in spec.objectives] == ["capacity_rps", "reference_p99_itl_ms"]
