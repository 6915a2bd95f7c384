"""The installed engine decides the flags, asked in a real subprocess: a stand-in python
whose vLLM 0.24.0 answers with its recorded `--help=all`, and the simulator's own answer."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.installed import parse_answer
from tuner.sim.serveargs import help_answer
from tuner.testing.worker_procs import start_worker

STAND_IN_024 = Path(__file__).resolve().parents[2] / "tuner" / "testing" / "vllm024" / "python"

STUDY = """
[model]
path = "models/tiny"
context_len = 4096
num_attention_heads = 4
[hardware]
gpu = "cpu"
[workload]
input_len = 128
output_len = 32
max_concurrency = 8
num_requests = 16
[space]
{space}
[space.ranges.max_num_partial_prefills]
high = 4
[space.ranges.long_prefill_token_threshold]
choices = [0, 256, 1024]
[engine]
kind = "{kind}"
python = "{python}"
"""


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_space_show_lists_what_the_stand_in_vllm_024_reports(study_file, run_cli, home):
    path = study_file(STUDY.format(space="", kind="vllm", python=STAND_IN_024))
    code, out, err = run_cli("space", "show", path)
    assert code == 0, err
    assert out.splitlines()[0] == "engine: vllm 0.24.0"
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("--")}
    assert rows["--max-num-partial-prefills"].split()[1:4] == ["int", "1", ".."]
    assert "0 | 256 | 1024" in rows["--long-prefill-token-threshold"]
    # 0.24's parser prints 0.92; it prints None for the batch defaults (no device seen)
    assert rows["--max-num-batched-tokens"].split()[-2:] == ["our", "table"]
    assert "note:" not in out
    cached = home / "studies" / "s" / "engine" / "vllm-0.24.0.json"
    assert json.loads(cached.read_text())["version"] == "0.24.0"


def test_the_cached_answer_is_used_for_the_same_version(study_file, run_cli, home):
    path = study_file(STUDY.format(space="", kind="vllm", python=STAND_IN_024))
    assert run_cli("space", "show", path)[0] == 0
    cached = home / "studies" / "s" / "engine" / "vllm-0.24.0.json"
    data = json.loads(cached.read_text())
    del data["flags"]["max_num_partial_prefills"]  # the cache now says it lacks the flag
    cached.write_text(json.dumps(data))
    code, out, _ = run_cli("space", "show", path)
    assert code == 0
    assert ("note: --max-num-partial-prefills left out: vllm 0.24.0 has no "
            "--max-num-partial-prefills") in out


def test_study_create_stores_the_answer_and_fixing_a_missing_flag_is_exit_2(
        study_file, run_cli, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    sim = study_file(STUDY.format(space="fixed = { async_scheduling = true }", kind="sim",
                                  python="python3").replace('gpu = "cpu"', 'gpu = "h200"'))
    code, out, err = run_cli("study", "create", sim, "--storage", url)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "tuner: error: study s: space.fixed.async_scheduling: tuner-sim "
        f"{parse_answer(help_answer('h200')).version} has no --async-scheduling; remove it "
        "from the study or use an engine that has it"]
    ok = study_file(STUDY.format(space="", kind="vllm", python=STAND_IN_024), "ok.toml")
    code, out, err = run_cli("study", "create", ok, "--storage", url)
    assert code == 0, err
    assert "engine: vllm 0.24.0" in out
    from tuner.storage import open_study

    opened = open_study("ok", url)
    assert opened.space.engine == "vllm 0.24.0"
    assert opened.study.user_attrs["tuner.engine"]["version"] == "0.24.0"
    assert "max_num_partial_prefills" in {p.name for p in opened.space.params}


def test_a_python_without_vllm_leaves_the_catalogue_with_a_note(study_file, run_cli):
    path = study_file(STUDY.format(space="", kind="vllm", python=sys.executable))
    code, out, err = run_cli("space", "show", path)
    assert code == 0, err
    assert out.startswith("engine: engine not asked (")
    assert "No package metadata was found for vllm" in out.splitlines()[0]
    assert "--max-num-partial-prefills" in out  # the catalogue alone: nothing left out


def test_worker_on_a_host_whose_vllm_lacks_a_study_flag_exits_2(study_file, tmp_path, home):
    """Created where vLLM 0.24 answers; the worker's host has an engine without the flag."""
    py = tmp_path / "py"
    py.write_text(f"#!/bin/sh\nexec {STAND_IN_024} \"$@\"\n")
    py.chmod(0o755)
    path = study_file(STUDY.format(space="fixed = { max_num_partial_prefills = 2 }",
                                   kind="vllm", python=py))
    url = f"sqlite:///{tmp_path}/t.db"
    from tuner.storage import create_study, load_study_file

    create_study(load_study_file(path), url)
    # the worker's host: a "vLLM 9.9" that answers like 0.24 without the partial prefills
    other = tmp_path / "other"
    (other / "vllm-9.9.dist-info").mkdir(parents=True)
    (other / "vllm-9.9.dist-info" / "METADATA").write_text("Name: vllm\nVersion: 9.9\n")
    help_text = (STAND_IN_024.parent / "serve-help-all.txt").read_text()
    cut = help_text.replace("  --max-num-partial-prefills MAX_NUM_PARTIAL_PREFILLS", "  --gone")
    (other / "help.txt").write_text(cut)
    (other / "vllm" / "entrypoints" / "cli").mkdir(parents=True)
    for d in ("vllm", "vllm/entrypoints", "vllm/entrypoints/cli"):
        (other / d / "__init__.py").write_text("")
    (other / "vllm" / "entrypoints" / "cli" / "main.py").write_text(
        f"import sys\nsys.stdout.write(open({str(other / 'help.txt')!r}).read())\n")
    py.write_text(f"#!/bin/sh\nPYTHONPATH={other} exec python3 \"$@\"\n")
    # the worker is told to run this python (a stored study cannot choose it, docs/deploy.md)
    proc = start_worker("s", url, "0", "--n-trials", "1", "--engine-python", str(py),
                        env={"TUNER_HOME": str(home)}, log=tmp_path / "w.log")
    assert proc.wait(timeout=120) == 2
    lines = (tmp_path / "w.log").read_text().strip().splitlines()
    assert lines[-1] == ("tuner: error: study s cannot run on this host: vllm 9.9 has no "
                         "--max-num-partial-prefills")


def test_sim_serve_help_all_is_the_answer_the_probe_parses():
    out = subprocess.run([sys.executable, "-m", "tuner", "sim", "serve", "--gpu", "l4",
                          "--help=all"], capture_output=True, text=True, check=True).stdout
    assert out == help_answer("l4")
    assert parse_answer(out).batch_device == "l4"
    short = subprocess.run([sys.executable, "-m", "tuner.sim", "serve", "--help=all"],
                           capture_output=True, text=True, check=True).stdout
    assert parse_answer(short).flags == parse_answer(help_answer("h200")).flags


@pytest.mark.parametrize("words, shown", [
    (["--no-async-scheduling"], "--no-async-scheduling"),
    (["--stream-interval", "4"], "--stream-interval 4"),
    (["--performance-mode", "throughput"], "--performance-mode throughput"),
    (["-O", "3"], "--optimization-level 3"),
    (["--max-cudagraph-capture-size", "256"], "--max-cudagraph-capture-size 256"),
])
def test_sim_refuses_flags_it_cannot_learn(tmp_path, words, shown):
    done = subprocess.run([sys.executable, "-m", "tuner.sim", "serve", "--model",
                           str(tmp_path), *words], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(f"error: tuner sim does not simulate {shown}: ")


def test_an_engine_python_that_cannot_run_is_a_note_not_a_crash(study_file, run_cli, tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)  # as a checkout's .venv-vllm link to itself
    path = study_file(STUDY.format(space="", kind="vllm", python=loop / "bin" / "python"))
    code, out, err = run_cli("space", "show", path)
    assert code == 0, err
    assert out.startswith(f"engine: engine not asked (cannot run {loop / 'bin' / 'python'}: ")


SIM_V1 = """
[model]
path = "models/llama3-8b"
[workload]
input_len = 256
output_len = 32
max_concurrency = 16
num_requests = 32
warmup_requests = 2
max_client_lag_ms = 50
min_gap_share = 0.5
[space]
fixed = { max_num_batched_tokens = 512, max_num_seqs = 64, enable_chunked_prefill = true, long_prefill_token_threshold = 128 }
[space.ranges.scheduling_policy]
choices = ["fcfs", "priority"]
[space.ranges.async_scheduling]
choices = [false, true]
[search]
n_trials = 1
baselines = false
[engine]
kind = "sim"
time_scale = 1
start_timeout_s = 30
"""


def test_a_sim_trial_runs_the_v1_flags_the_simulator_learns(study_file, tmp_path, home):
    """The simulator's space has the scheduling policy, not async scheduling (it refuses
    to simulate it off); the fixed threshold reaches the server's command line."""
    from optuna.trial import TrialState

    from tuner.storage import create_study, load_study_file, open_study

    url = f"sqlite:///{tmp_path}/t.db"
    opened, _ = create_study(load_study_file(study_file(SIM_V1, "v1.toml")), url)
    assert "scheduling_policy" in {p.name for p in opened.space.params}
    assert "async_scheduling" not in opened.space.names
    assert any(n.startswith("--async-scheduling left out: tuner-sim ")
               for n in opened.space.notes)
    proc = start_worker("v1", url, "0", env={"TUNER_HOME": str(home)}, log=tmp_path / "w.log")
    assert proc.wait(timeout=240) == 0, (tmp_path / "w.log").read_text()[-3000:]
    done = [t for t in open_study("v1", url).study.get_trials(deepcopy=False)
            if t.state == TrialState.COMPLETE]
    assert len(done) == 1 and done[0].user_attrs["outcome"] == "measured"
    command = done[0].user_attrs["command"]
    assert command[command.index("--long-prefill-token-threshold") + 1] == "128"
    assert "--scheduling-policy" in command
