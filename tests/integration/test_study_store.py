"""Studies in storage, on SQLite and PostgreSQL: create, idempotence, conflicts, listing."""

import optuna
import pytest

from tuner.errors import StudyConflictError, StudyNotFoundError
from tuner.storage import create_study, load_study_file, open_study
from tuner.storage.database import mask, resolve_url

DEMO = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 512
output_len = 64
max_concurrency = 32
num_requests = 100
[slo]
p99_itl_ms = 50
[engine]
kind = "sim"
'''


def test_create_list_and_baselines(storage_url, study_file, run_cli):
    path = study_file(DEMO, "demo.toml")
    code, out, err = run_cli("study", "create", path, "--storage", storage_url)
    assert code == 0, err
    assert "study demo created" in out and "3 baselines queued" in out
    code, out, _ = run_cli("study", "list", "--storage", storage_url)
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("demo "))
    assert "article" in row and row.split()[2] == "3"
    opened = open_study("demo", storage_url)
    waiting = opened.study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert [t.user_attrs["baseline"] for t in waiting] == ["default", "article", "article-chunked"]
    assert waiting[0].user_attrs["launch"] == {"tensor_parallel_size": 1}
    assert waiting[1].user_attrs["flags"]["enforce_eager"] is True
    assert opened.spec == load_study_file(path)


def test_create_is_idempotent(storage_url, study_file):
    spec = load_study_file(study_file(DEMO, "demo.toml"))
    _, created = create_study(spec, storage_url)
    again, created_again = create_study(spec, storage_url)
    assert created and not created_again
    assert len(again.study.get_trials()) == 3  # baselines not enqueued twice


def test_changed_space_is_refused(storage_url, study_file, run_cli):
    create_study(load_study_file(study_file(DEMO, "demo.toml")), storage_url)
    changed = study_file(DEMO.replace('kind = "sim"', 'kind = "sim"\n[space]\nrules = "vllm-v1"'),
                         "demo.toml")
    with pytest.raises(StudyConflictError, match="rules"):
        create_study(load_study_file(changed), storage_url)
    code, _, err = run_cli("study", "create", changed, "--storage", storage_url)
    assert code == 2 and "already exists" in err and len(err.strip().splitlines()) == 1


def test_unknown_study_lists_existing(storage_url, study_file):
    create_study(load_study_file(study_file(DEMO, "demo.toml")), storage_url)
    with pytest.raises(StudyNotFoundError, match="demo"):
        open_study("nope", storage_url)


def test_password_never_printed(run_cli):
    url = "postgresql+psycopg://tuner:s3cret@127.0.0.1:1/none"
    assert "s3cret" not in mask(url) and "***" in mask(url)
    code, out, err = run_cli("study", "list", "--storage", url)
    assert code == 1 and "s3cret" not in out + err and "cannot open storage" in err


def test_storage_url_from_file_and_environment(tmp_path, monkeypatch):
    f = tmp_path / "url"
    f.write_text("postgresql://u:p@h/db\n")
    assert resolve_url(f"@{f}") == "postgresql+psycopg://u:p@h/db"
    monkeypatch.setenv("TUNER_STORAGE", f"sqlite:///{tmp_path}/x.db")
    assert resolve_url(None) == f"sqlite:///{tmp_path}/x.db"
    monkeypatch.chdir(tmp_path)  # a relative path is taken from the current folder
    monkeypatch.setenv("TUNER_STORAGE", "sqlite:///x.db")
    assert resolve_url(None) == f"sqlite:///{tmp_path}/x.db"
