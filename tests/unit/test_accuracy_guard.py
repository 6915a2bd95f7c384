"""tuner.accuracy.guard and the accuracy constraint: who records the reference, who
replays it, what a replay's record says, and what is told to the sampler."""

import pytest

from tuner.accuracy import guard
from tuner.accuracy.client import parse_completion
from tuner.accuracy.figures import Figures
from tuner.errors import AccuracyError
from tuner.storage import load_study_file
from tuner.trials import record
from tuner.trials.record import TrialRecord

MODEL = '[model]\npath = "models/llama3-8b"\n'
OPT_IN = '[space]\nlossy = ["kv_cache_dtype"]\n'
FP8 = {"kv_cache_dtype": "fp8", "block_size": 16}
AUTO = {"kv_cache_dtype": "auto", "block_size": 16}


def spec(study_file, text=""):
    return load_study_file(study_file(MODEL + text))


def test_a_lossless_study_is_not_guarded(study_file):
    s = spec(study_file, "[slo]\nmin_token_agreement = 0.9\n")
    assert s.accuracy_limit is None
    assert guard.role(s, AUTO, "default") is None
    assert record.accuracy_constraint(s, None, FP8) == {}


def test_an_opted_in_study_records_a_reference_and_replays_lossy_trials(study_file):
    s = spec(study_file, OPT_IN)
    assert s.accuracy_limit == 0.97  # the default limit once a study opts in
    assert guard.role(s, AUTO, "default") == guard.REFERENCE
    assert guard.role(s, FP8, None) == guard.REPLAY
    assert guard.role(s, AUTO, None) is None and guard.role(s, AUTO, "article") is None


def test_a_replay_below_the_limit_fails_its_constraint(study_file):
    s = spec(study_file, OPT_IN + "[slo]\nmin_token_agreement = 0.95\n")
    low = Figures(0.9, 0.05, 32, 5, 1800, 2048)
    attrs = guard.replay_attrs(s, FP8, low, reference_trial=0)
    assert attrs["passed"] is False and attrs["lossy"] == {"kv_cache_dtype": "fp8"}
    assert attrs["token_agreement"] == 0.9 and attrs["min_token_agreement"] == 0.95
    told = record.with_accuracy(s, record.measured(s, {"output_throughput": 1.0,
                                                       "p99_itl_ms": 1.0},
                                                   TrialRecord(flags=FP8)), attrs)
    assert told.constraints[record.ACCURACY] == pytest.approx(0.05)
    assert not told.feasible
    high = guard.replay_attrs(s, FP8, Figures(0.99, 0.01, 32, 1, 2040, 2048), 0)
    assert record.accuracy_constraint(s, high, FP8)[record.ACCURACY] == pytest.approx(-0.04)


def test_lossless_trials_pass_by_class_and_unchecked_lossy_ones_fail(study_file):
    s = spec(study_file, OPT_IN)
    assert record.accuracy_constraint(s, None, AUTO) == {record.ACCURACY: pytest.approx(-0.03)}
    assert record.accuracy_constraint(s, None, FP8) == {record.ACCURACY: 1.0}
    unchecked = guard.unchecked_attrs(s, FP8, "no reference yet")
    assert record.accuracy_constraint(s, unchecked, FP8) == {record.ACCURACY: 1.0}
    assert record.accuracy_constraint(s, None, AUTO, started=False) == {record.ACCURACY: 1.0}
    told = record.infeasible(s, {"class": "oom"}, TrialRecord(flags=AUTO))
    assert told.constraints[record.ACCURACY] == 1.0


def test_dummy_weights_and_the_simulator_carry_a_caveat(study_file):
    dummy = spec(study_file, OPT_IN)  # engine.extra_args defaults to --load-format dummy
    assert guard.caveat(dummy) == guard.DUMMY
    assert guard.replay_attrs(dummy, FP8, Figures(1.0, 0.0, 1, 0, 1, 1), 0)["caveat"] \
        == guard.DUMMY
    real = spec(study_file, OPT_IN + "[engine]\nextra_args = []\n")
    assert guard.caveat(real) is None
    sim = spec(study_file, OPT_IN + '[engine]\nkind = "sim"\n')
    assert guard.caveat(sim) == guard.SIMULATED


def test_a_reply_without_logprobs_is_an_accuracy_error():
    good = {"choices": [{"logprobs": {"tokens": ["a", "b"], "token_logprobs": [None, -1]}}]}
    c = parse_completion(good)
    assert c.tokens == ("a", "b") and c.logprobs == (None, -1.0)
    with pytest.raises(AccuracyError):
        parse_completion({"choices": [{"logprobs": None}]})
