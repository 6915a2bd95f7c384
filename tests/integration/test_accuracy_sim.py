"""The accuracy guard end to end on the simulator: a real `tuner worker`, real `tuner sim
serve` servers answering greedy requests with logprobs, real storage. The default baseline
records the reference; an fp8 trial replays it, and below the study's limit it is recorded
with its figures and infeasible."""

from optuna.trial import TrialState

import json
import urllib.request

from tuner.runner.guard import REFERENCE_ATTR
from tuner.testing.api_procs import api_process
from tuner.storage import create_study, load_study_file, open_study
from tuner.testing.worker_procs import start_worker
from tuner.trials import record

SIM = '''
[model]
path = "models/llama3-8b"
[workload]
input_len = 128
output_len = 16
max_concurrency = 8
num_requests = 24
warmup_requests = 2
max_client_lag_ms = 50
# on shared cores the client reads some tokens coalesced: judge the gaps loosely, as the
# other simulator tests do (the default baseline must measure: it records the reference)
min_gap_share = 0.5
[slo]
min_token_agreement = {limit}
[space]
lossy = ["kv_cache_dtype"]
[accuracy]
prompts = 16
max_tokens = 32
[search]
n_trials = 4
[engine]
kind = "sim"
start_timeout_s = 30
'''


def _run(study_file, storage_url, tmp_path, limit):
    spec = load_study_file(study_file(SIM.format(limit=limit), "acc.toml"))
    create_study(spec, storage_url)
    opened = open_study("acc", storage_url)
    default = next(t for t in opened.study.get_trials(deepcopy=False)
                   if t.user_attrs.get("baseline") == "default")
    # after the three baselines: the default with an fp8 KV cache
    opened.study.enqueue_trial({**default.params, "kv_cache_dtype": "fp8"})
    proc = start_worker("acc", storage_url, "0", env={"TUNER_HOME": str(tmp_path)},
                        log=tmp_path / "worker.log")
    assert proc.wait(timeout=300) == 0, (tmp_path / "worker.log").read_text()[-3000:]
    study = open_study("acc", storage_url).study
    return study, [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]


def test_an_fp8_trial_below_the_limit_is_recorded_with_its_figures_and_infeasible(
        storage_url, study_file, tmp_path, run_cli):
    study, done = _run(study_file, storage_url, tmp_path, 0.97)
    seen = [(t.number, t.user_attrs.get("outcome"), t.user_attrs.get("failure"))
            for t in study.get_trials(deepcopy=False)]
    default = next((t for t in done if t.user_attrs.get("baseline") == "default"), None)
    assert default is not None and default.user_attrs["outcome"] == record.MEASURED, seen
    assert default.user_attrs["accuracy"]["role"] == "reference"
    assert "accuracy" in default.user_attrs["phases"]
    reference = study.user_attrs[REFERENCE_ATTR]
    assert reference["trial"] == default.number and len(reference["completions"]) == 16
    assert all(len(c["tokens"]) == 32 for c in reference["completions"])
    fp8 = next((t for t in done if t.user_attrs["flags"]["kv_cache_dtype"] == "fp8"), None)
    assert fp8 is not None, seen
    acc = fp8.user_attrs["accuracy"]
    assert fp8.user_attrs["outcome"] == record.MEASURED, seen
    assert acc["role"] == "replay" and acc["reference_trial"] == default.number
    assert 0 < acc["token_agreement"] < 0.97 and acc["passed"] is False
    assert acc["logprob_diff"] > 0 and "say nothing" in acc["caveat"]
    assert fp8.constraints[record.ACCURACY] > 0  # told: the sampler learns it
    assert fp8.user_attrs["phases"]["accuracy"] > 0
    for t in done:  # lossless trials pass by their class, and are not replayed
        if t.user_attrs["flags"]["kv_cache_dtype"] == "auto":
            assert t.constraints[record.ACCURACY] < 0
            assert t.user_attrs.get("accuracy", {}).get("role") != "replay"

    _results_show_it_as_infeasible(fp8.number, storage_url, tmp_path, run_cli)


def _results_show_it_as_infeasible(number, storage_url, tmp_path, run_cli):
    """pareto, best (three formats), the report and the API: the fp8 trial is marked lossy,
    shown with its figures as below the limit, and never best."""
    code, out, err = run_cli("pareto", "acc", "--storage", storage_url)
    assert code == 0, err
    assert "below the accuracy limit (infeasible" in out
    line = next((x for x in out.splitlines() if x.strip().startswith(f"trial {number}:")), "")
    assert line, out
    assert "LOSSY kv_cache_dtype=fp8: token agreement 0." in line and "INFEASIBLE" in line
    assert "say nothing" in line  # the simulator's caveat
    for fmt in ("cli", "yaml", "json"):
        code, out, err = run_cli("best", "acc", "--storage", storage_url, "--format", fmt)
        assert code == 0, err
        assert "LOSSY" not in out + err and ("kv-cache-dtype auto" in out
                                             or "kv-cache-dtype: auto" in out
                                             or '"kv_cache_dtype": "auto"' in out), out
    doc = json.loads(run_cli("best", "acc", "--storage", storage_url, "--format", "json")[1])
    assert doc["lossless"] is True and doc["lossy_flags"] == {} and doc["trial"] != number
    code, _, err = run_cli("report", "acc", "--storage", storage_url, "-o", tmp_path / "r.html")
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "LOSSY kv_cache_dtype=fp8: token agreement" in html and "INFEASIBLE" in html
    with api_process(storage_url, tmp_path / "api.log") as base:
        with urllib.request.urlopen(f"{base}/studies/acc/pareto", timeout=30) as r:
            body = json.loads(r.read())
    assert number not in [row["trial"] for row in body["front"]]
    refused = {row["trial"]: row for row in body["below_accuracy_limit"]}
    assert refused[number]["lossy_flags"] == {"kv_cache_dtype": "fp8"}
    assert refused[number]["accuracy"]["token_agreement"] < 0.97
    assert body["min_token_agreement"] == 0.97
