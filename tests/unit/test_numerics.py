"""tuner.numerics: every catalogue flag classed lossless or lossy, with a reason and
a source; the space refuses lossy values unless the study opts in."""

import pytest

from tuner.errors import StudyFileError
from tuner.space import CATALOGUE, build_space, repair
from tuner.numerics import TABLE, is_lossy, lossy_flags, lossy_names, numerics
from tuner.storage import load_study_file

MODEL = '[model]\npath = "models/llama3-8b"\n'


def test_every_catalogue_flag_is_classed_with_a_reason_and_a_vllm_source():
    for p in CATALOGUE:
        entry = numerics(p.name)  # KeyError for a flag nobody classed
        assert entry.cls in ("lossless", "lossy")
        assert entry.reason and "\n" not in entry.reason
        assert "vllm" in entry.source.lower()
        if entry.cls == "lossy":
            assert entry.exact, f"{p.name}: a lossy flag names its exact values"
    assert set(TABLE) == {p.name for p in CATALOGUE}


def test_fp8_kv_cache_is_lossy_and_the_model_dtype_is_not():
    assert lossy_names() == ("kv_cache_dtype",)
    assert is_lossy("kv_cache_dtype", "fp8") and is_lossy("kv_cache_dtype", "fp8_e5m2")
    assert not is_lossy("kv_cache_dtype", "auto")
    assert not is_lossy("block_size", 32) and not is_lossy("no_such_flag", 1)
    assert lossy_flags({"kv_cache_dtype": "fp8", "block_size": 32}) == {"kv_cache_dtype": "fp8"}


def _space(study_file, text):
    return build_space(load_study_file(study_file(MODEL + text)))


def test_the_default_space_is_lossless(study_file):
    space = _space(study_file, "")
    assert space.param("kv_cache_dtype").choices == ("auto",)
    assert space.lossy == ()
    refused = repair(space, {**space.defaults, "kv_cache_dtype": "fp8"})
    assert refused.infeasible and "lossy" in refused.infeasible
    assert not space.contains({**space.defaults, "kv_cache_dtype": "fp8"})


def test_a_study_that_opts_in_tunes_the_lossy_values(study_file):
    space = _space(study_file, '[space]\nlossy = ["kv_cache_dtype"]\n')
    assert space.param("kv_cache_dtype").choices == ("auto", "fp8")
    assert space.lossy == ("kv_cache_dtype",)
    assert space.describe()["lossy"] == ["kv_cache_dtype"]
    flags = {**space.defaults, "kv_cache_dtype": "fp8"}
    assert repair(space, flags).infeasible is None


@pytest.mark.parametrize("text,key", [
    ('[space]\nfixed = { kv_cache_dtype = "fp8" }\n', "space.fixed.kv_cache_dtype"),
    ('[space.ranges.kv_cache_dtype]\nchoices = ["auto", "fp8"]\n',
     "space.ranges.kv_cache_dtype"),
    ('[space]\nlossy = ["block_size"]\n', "space.lossy"),
])
def test_a_lossy_value_without_the_opt_in_is_refused_naming_the_key(study_file, text, key):
    with pytest.raises(StudyFileError) as e:  # the loader builds the space
        _space(study_file, text)
    assert f": {key}: " in e.value.args[0]


def test_with_the_opt_in_a_fixed_lossy_value_is_kept(study_file):
    space = _space(study_file, '[space]\nlossy = ["kv_cache_dtype"]\n'
                               'fixed = { kv_cache_dtype = "fp8" }\n')
    assert space.fixed["kv_cache_dtype"] == "fp8"


def test_a_lossless_range_of_a_lossy_flag_needs_no_opt_in(study_file):
    space = _space(study_file, '[space.ranges.kv_cache_dtype]\nchoices = ["auto"]\n')
    assert space.param("kv_cache_dtype").choices == ("auto",)
