"""The study's ``[engine] start`` key: its default, the simulator's refusal, the launch's
environment, and which starter a study gets."""

from __future__ import annotations

import pydantic
import pytest

from tuner.engine import command, preimport
from tuner.engine.supervisor import plain_start
from tuner.spec.study import StudySpec
from tuner.testing.studies import study_spec

pytestmark = pytest.mark.unit


def _with_engine(**engine) -> StudySpec:
    data = study_spec("s").model_dump()
    data["engine"].update(engine)
    return StudySpec.model_validate(data)


def test_plain_is_the_default_and_adds_nothing_to_the_environment():
    spec = study_spec("s")
    assert spec.engine.start == "plain"
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in command.launch(spec, {}, 8000, [0]).env
    assert preimport.for_study(spec, "/tmp/slot") is plain_start


def test_preimported_forks_the_engine_core_unless_the_study_says_otherwise(tmp_path):
    spec = _with_engine(start="preimported")
    assert command.launch(spec, {}, 8000, [0]).env["VLLM_WORKER_MULTIPROC_METHOD"] == "fork"
    own = _with_engine(start="preimported", env={"VLLM_WORKER_MULTIPROC_METHOD": "spawn"})
    assert command.launch(own, {}, 8000, [0]).env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    starter = preimport.for_study(spec, tmp_path)
    assert isinstance(starter, preimport.Preimported)
    assert preimport.for_study(spec, tmp_path) is starter  # one per slot


def test_the_simulator_refuses_a_preimported_start():
    with pytest.raises(pydantic.ValidationError, match="engine.start = 'preimported' is for "
                       "vLLM only"):
        _with_engine(kind="sim", start="preimported", extra_args=[])
    with pytest.raises(pydantic.ValidationError):
        _with_engine(start="forked")
