"""A study file that sets a TTFT and an ITL limit and names no objectives asks the headline
question: the capacity objectives (tuner.spec.study.file_objectives). Any other file keeps
the saturated trade-off, a file that names its objectives keeps them, and the committed
studies keep what they measured before the rule (issue 63)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from tuner.errors import StudyFileError
from tuner.spec.study import CAPACITY_OBJECTIVES, DEFAULT_OBJECTIVES
from tuner.storage import load_study_file
from tuner.testing.examples import STUDIES_DIR, fill_template, ready_study_files

pytestmark = pytest.mark.unit

MODEL = f'[model]\npath = "{STUDIES_DIR}/models/llama3-8b"\n'
RATE = "[capacity]\nreference_rate = 6\n"
# The committed studies that measure capacity, and the one with objectives of its own;
# every other one keeps the saturated trade-off it measured before a TTFT and an ITL limit
# made a capacity study.
CAPACITY_STUDIES = {"capacity-sim", "llama3-8b-h100-capacity", "llama3-8b-h100-capacity-25ms"}
OWN_OBJECTIVES = {"tiny-cpu": ["output_throughput", "p99_itl_per_token_ms"]}


def _load(tmp_path: Path, text: str):
    path = tmp_path / "s.toml"
    path.write_text(MODEL + text)
    return load_study_file(path)


def test_a_ttft_and_an_itl_limit_without_objectives_make_a_capacity_study(tmp_path):
    spec = _load(tmp_path, "[slo]\np99_ttft_ms = 1000\np99_itl_ms = 50\n" + RATE)
    assert tuple(spec.objectives) == CAPACITY_OBJECTIVES
    assert [o.metric for o in spec.objectives] == ["capacity_rps", "reference_p99_itl_ms"]
    assert spec.measures_capacity and spec.capacity.reference_rate == 6


@pytest.mark.parametrize("slo", ["", "[slo]\np99_itl_ms = 50\n", "[slo]\np99_ttft_ms = 900\n",
                                 "[slo]\np99_itl_ms = 50\np99_tpot_ms = 40\n"])
def test_without_both_limits_the_default_is_the_saturated_trade_off(tmp_path, slo):
    spec = _load(tmp_path, slo)
    assert tuple(spec.objectives) == DEFAULT_OBJECTIVES and not spec.measures_capacity


def test_named_objectives_win_over_the_limits(tmp_path):
    spec = _load(tmp_path, '[[objectives]]\nmetric = "output_throughput"\n'
                           'direction = "maximize"\n[slo]\np99_ttft_ms = 1000\np99_itl_ms = 50\n')
    assert [o.metric for o in spec.objectives] == ["output_throughput"]
    assert not spec.measures_capacity


def test_a_capacity_study_by_default_asks_for_its_reference_rate(tmp_path):
    with pytest.raises(StudyFileError) as e:
        _load(tmp_path, "[slo]\np99_ttft_ms = 1000\np99_itl_ms = 50\n")
    (line,) = str(e.value).splitlines()
    assert "capacity.reference_rate" in line and "[[objectives]]" in line, line


@pytest.mark.parametrize("path", ready_study_files(), ids=lambda p: p.stem)
def test_the_committed_studies_keep_their_objectives(path):
    spec = load_study_file(path)
    expected = CAPACITY_OBJECTIVES if path.stem in CAPACITY_STUDIES else DEFAULT_OBJECTIVES
    if path.stem in OWN_OBJECTIVES:
        assert [o.metric for o in spec.objectives] == OWN_OBJECTIVES[path.stem]
    else:
        assert tuple(spec.objectives) == expected
    assert spec.measures_capacity == (path.stem in CAPACITY_STUDIES)


@pytest.mark.parametrize("engine", ["vllm", "sim"])
def test_the_template_is_a_capacity_study_with_both_limits_and_a_reference_rate(tmp_path,
                                                                                engine):
    text = fill_template({"MODEL_FOLDER": f"{STUDIES_DIR}/models/llama3-8b", "GPU": "h100",
                          "VLLM_PYTHON": sys.executable})
    assert "objectives" not in tomllib.loads(text)  # it gets them from its limits
    if engine == "sim":  # as its comment says: to try it on the simulated engine first
        text = text.replace('kind = "vllm"', 'kind = "sim"\ntime_scale = 2')
    path = tmp_path / "my-model.toml"
    path.write_text(text)
    spec = load_study_file(path)
    assert spec.engine.kind == engine
    assert spec.slo.p99_ttft_ms and spec.slo.p99_itl_ms and spec.capacity.reference_rate
    assert tuple(spec.objectives) == CAPACITY_OBJECTIVES and spec.measures_capacity
