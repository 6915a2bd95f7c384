"""Seen case 4 of issue 20: the shared database was trusted to run commands. A stored
study's engine.command ran as root on every worker, and a stored study named
'../../../escape' made a worker write outside TUNER_HOME. Now a worker runs only programs
on its own allow-list (or with --trust-stored-engine), and study names are checked when
read from the storage too. Real `tuner worker` processes on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import shlex

import optuna

from tuner.storage import create_study, load_study_file
from tuner.storage.studies import SPEC
from tuner.testing.cli_fork import run_tuner

STUDY = '''
[model]
path = "models/llama3-8b"
[search]
n_trials = 1
baselines = false
[engine]
start_timeout_s = 20
{engine}
'''


def worker(name, url, home, *extra, env=None) -> tuple[int, list[str]]:
    out = run_tuner(["worker", name, "--storage", url, "--gpus", "0", *extra], timeout=120,
                    env={**os.environ, "TUNER_HOME": str(home), **(env or {})})
    return out.returncode, out.stderr.strip().splitlines()


def stored(study_file, url, engine: str, name="s"):
    create_study(load_study_file(study_file(STUDY.format(engine=engine), f"{name}.toml")), url)


def test_a_stored_command_runs_only_on_a_worker_that_allows_it(storage_url, study_file,
                                                               tmp_path):
    marker = tmp_path / "ran"
    command = ["sh", "-c", f"touch {marker}"]
    stored(study_file, storage_url, f"command = {command!r}".replace("'", '"'))
    code, lines = worker("s", storage_url, tmp_path)
    assert code == 2 and len(lines) == 1 and "--trust-stored-engine" in lines[0], lines
    assert "sh -c" in lines[0] and not marker.exists()
    # listed by the worker's own operator: it runs (and, being no server, is infeasible)
    code, lines = worker("s", storage_url, tmp_path,
                         env={"TUNER_ALLOWED_ENGINES": f"python3; {shlex.join(command)}"})
    assert code == 0 and marker.exists(), lines
    marker.unlink()
    code, lines = worker("s", storage_url, tmp_path, "--trust-stored-engine")
    assert code == 0, lines  # the study's budget is spent: nothing more runs
    assert not marker.exists()


def test_stored_python_env_and_args_need_trust(storage_url, study_file, tmp_path):
    stored(study_file, storage_url, 'python = "/usr/bin/evil"', "py")
    code, lines = worker("py", storage_url, tmp_path)
    assert code == 2 and len(lines) == 1 and "/usr/bin/evil" in lines[0], lines
    code, lines = worker("py", storage_url, tmp_path, "--engine-python", "/usr/bin/evil")
    assert code == 2 and lines == [  # allowed by the operator, but not on this host
        "tuner: error: study py: the engine program /usr/bin/evil is not on this host; "
        "install it, or give the worker's own with --engine-python"], lines
    stored(study_file, storage_url, 'env = { LD_PRELOAD = "/tmp/x.so" }', "env")
    code, lines = worker("env", storage_url, tmp_path)
    assert code == 2 and len(lines) == 1 and "engine.env LD_PRELOAD" in lines[0], lines
    stored(study_file, storage_url, 'extra_args = ["--trust-remote-code"]', "args")
    code, lines = worker("args", storage_url, tmp_path)
    assert code == 2 and len(lines) == 1 and "--trust-remote-code" in lines[0], lines


def test_a_stored_study_name_cannot_leave_tuner_home(storage_url, study_file, tmp_path):
    spec = load_study_file(study_file(STUDY.format(engine='kind = "sim"\ntime_scale = 1000'),
                                      "ok.toml"))
    create_study(spec, storage_url)
    ok = optuna.load_study(study_name="ok", storage=storage_url)
    evil = optuna.create_study(study_name="../../../escape", storage=storage_url,
                               directions=["maximize", "minimize"])
    for key, value in ok.user_attrs.items():
        evil.set_user_attr(key, value)
    home = tmp_path / "a" / "b" / "c"
    code, lines = worker("../../../escape", storage_url, home)
    assert code == 2 and len(lines) == 1 and "escape" in lines[0], lines
    assert [p for p in tmp_path.rglob("*escape*")] == []
    assert evil.get_trials() == []
    # a stored definition that names another study is refused too
    evil2 = optuna.create_study(study_name="other", storage=storage_url,
                                directions=["maximize", "minimize"])
    evil2.set_user_attr(SPEC, ok.user_attrs[SPEC])
    code, lines = worker("other", storage_url, home)
    assert code == 2 and len(lines) == 1 and "'ok'" in lines[0], lines


def _tamper(url: str, name: str, **engine) -> None:
    """Rewrite a stored study's engine section, as anyone who can write the database can."""
    study = optuna.load_study(study_name=name, storage=url)
    spec = dict(study.user_attrs[SPEC])
    spec["engine"] = {**spec["engine"], **engine}
    study.set_user_attr(SPEC, spec)


def test_a_tampered_simulated_study_runs_no_command(storage_url, study_file, tmp_path):
    """Seen case 1 of issue 47: the simulator skipped every check, yet its server took the
    stored engine.env, and PYTHONWARNINGS plus BROWSER ran a shell as the worker's user."""
    marker = tmp_path / "ran"
    stored(study_file, storage_url, 'kind = "sim"\ntime_scale = 1000', "sim")
    _tamper(storage_url, "sim", env={"PYTHONWARNINGS": "ignore::antigravity.x",
                                     "BROWSER": f'sh -c "id > {marker}" #%s'})
    code, lines = worker("sim", storage_url, tmp_path)
    assert code == 2 and len(lines) == 1 and "engine.env" in lines[0], lines
    assert "simulator" in lines[0] and not marker.exists()
    # trust in the database does not make the simulator take an environment either
    code, lines = worker("sim", storage_url, tmp_path, "--trust-stored-engine")
    assert code == 2 and len(lines) == 1 and not marker.exists(), lines
    _tamper(storage_url, "sim", env={}, extra_args=["--worker-cls=evil.Worker"])
    code, lines = worker("sim", storage_url, tmp_path)
    assert code == 2 and len(lines) == 1 and "--worker-cls=evil.Worker" in lines[0], lines
    assert optuna.load_study(study_name="sim", storage=storage_url).get_trials() == []


def test_env_names_that_load_a_library_need_trust(storage_url, study_file, tmp_path):
    """Allowed prefixes once passed CUDA's injection library and NCCL's plugins."""
    stored(study_file, storage_url, 'python = "python3"', "lib")
    for name in ("CUDA_INJECTION64_PATH", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN",
                 "TRITON_PTXAS_PATH", "VLLM_PLUGINS"):
        _tamper(storage_url, "lib", env={"VLLM_USE_V1": "1", name: "/tmp/x.so"})
        code, lines = worker("lib", storage_url, tmp_path)
        assert code == 2 and len(lines) == 1, lines
        assert f"sets engine.env {name}, which can load code" in lines[0], lines
    assert optuna.load_study(study_name="lib", storage=storage_url).get_trials() == []


def test_the_cross_check_python_needs_the_allow_list_too(storage_url, study_file, tmp_path):
    """An allowed engine.command with crosscheck_trials ran the stored engine.python for
    `vllm bench serve`, which nothing checked."""
    marker = tmp_path / "ran"
    command = ["sh", "-c", f"touch {marker}"]
    stored(study_file, storage_url, f"command = {command!r}\n".replace("'", '"') +
           'python = "/usr/bin/evil"\ncrosscheck_trials = 1', "xc")
    code, lines = worker("xc", storage_url, tmp_path,
                         env={"TUNER_ALLOWED_ENGINES": shlex.join(command)})
    assert code == 2 and len(lines) == 1, lines
    assert "engine.python /usr/bin/evil" in lines[0] and "crosscheck_trials" in lines[0]
    assert not marker.exists()
