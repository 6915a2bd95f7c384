"""Seen in issue 63 (item 5): ``p99_itl_ms = 0.04`` (seconds written into a _ms key) was
accepted and every trial missed it; a wrong model path was reported under
``model.context_len``. Each is a real `tuner study create`: exit 2, one line naming the key
and what to write, and no study created."""

from __future__ import annotations

import os

import optuna
import pytest

from tuner.testing.cli_fork import run_tuner

BASE = '''
[model]
path = "{model}"
[search]
baselines = false
[engine]
kind = "sim"
'''


def _create(study_file, tmp_path, text: str) -> tuple[int, list[str], str]:
    path = study_file(text, "units.toml")
    url = f"sqlite:///{tmp_path}/x.db"
    out = run_tuner(["study", "create", path, "--storage", url],
                    env={**os.environ, "TUNER_HOME": str(tmp_path / "home")})
    return out.returncode, out.stderr.strip().splitlines(), url


@pytest.mark.parametrize("key,value,least", [
    ("p99_itl_ms", "0.04", "1 ms"), ("p99_tpot_ms", "0.5", "1 ms"),
    ("p99_e2el_ms", "0.9", "1 ms"), ("p99_ttft_ms", "2", "10 ms")])
def test_a_limit_too_small_for_milliseconds_is_refused_naming_the_unit(
        key, value, least, study_file, tmp_path):
    text = BASE.format(model="models/llama3-8b") + f"[slo]\n{key} = {value}\n"
    code, lines, url = _create(study_file, tmp_path, text)
    assert code == 2 and len(lines) == 1, lines
    assert f"key 'slo.{key}'" in lines[0] and f"{key} = {value}" in lines[0], lines[0]
    assert "milliseconds" in lines[0] and least in lines[0], lines[0]
    assert f"write {float(value) * 1000:g}" in lines[0], lines[0]
    assert "Traceback" not in "\n".join(lines)
    assert optuna.get_all_study_summaries(url) == []


def test_the_least_limits_are_accepted(study_file, tmp_path):
    text = (BASE.format(model="models/llama3-8b") + "[slo]\np99_itl_ms = 1\np99_ttft_ms = 10\n"
            + "[capacity]\nreference_rate = 4\n")  # both limits: a capacity study
    code, lines, _ = _create(study_file, tmp_path, text)
    assert code == 0, lines


@pytest.mark.parametrize("where,what", [("nowhere", "no model folder"),
                                        ("empty", "has no config.json")])
def test_a_missing_model_folder_is_reported_as_model_path(where, what, study_file, tmp_path):
    (tmp_path / "empty").mkdir()
    code, lines, _ = _create(study_file, tmp_path, BASE.format(model=where))
    assert code == 2 and len(lines) == 1, lines
    assert "key 'model.path'" in lines[0] and what in lines[0], lines[0]
    assert str(tmp_path / where) in lines[0] and "context_len" in lines[0], lines[0]
