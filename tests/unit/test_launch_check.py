"""A stored launch meets the catalogue and the lossless rule again before a worker runs it
(issue 47 case 2): every baseline tuner itself queues passes, and each way the dashboard or
a database login could rewrite one is refused with one line naming the flag."""

from pathlib import Path

import pytest

from tuner.space import baselines, build_space
from tuner.space.check import launch_problem
from tuner.storage import load_study_file
from tuner.testing.examples import ready_study_files

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("study", ready_study_files(), ids=lambda p: p.stem)
def test_every_baseline_tuner_queues_passes(study):
    spec = load_study_file(study)
    model = spec.model.model_copy(update={"path": str(REPO / "studies/models" /
                                                      Path(spec.model.path).name)})
    space = build_space(spec.model_copy(update={"model": model}))
    for b in baselines(space):
        assert launch_problem(b.launch, space.lossy) is None, (b.name, b.launch)


@pytest.mark.parametrize("launch, words", [
    ({"gpu_memory_utilization": 5}, "--gpu-memory-utilization 5: 5 is outside 0.01..1"),
    ({"max_num_seqs": 99999999}, "--max-num-seqs 99999999: 99999999 is outside"),
    ({"max_num_seqs": "8 --trust-remote-code"}, "is not an integer"),
    ({"enforce_eager": "yes"}, "--enforce-eager 'yes': 'yes' is not true or false"),
    ({"kv_cache_dtype": "fp8"}, "--kv-cache-dtype 'fp8' is lossy, and the study did not opt in"),
    ({"kv_cache_dtype": "../x"}, "is not one of auto"),
    ({"trust_remote_code": True}, "'trust_remote_code' is not a flag tuner knows"),
    (["--trust-remote-code"], "the launch is list, not a table of flags"),
])
def test_a_rewritten_launch_is_refused_naming_the_flag(launch, words):
    problem = launch_problem(launch, ())
    assert problem is not None and words in problem and "\n" not in problem


def test_a_lossy_value_passes_where_the_study_opted_in():
    assert launch_problem({"kv_cache_dtype": "fp8"}, ("kv_cache_dtype",)) is None
    assert launch_problem({"kv_cache_dtype": "auto", "max_num_seqs": 256}, ()) is None
