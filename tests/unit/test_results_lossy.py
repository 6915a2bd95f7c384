"""Lossy flags in the results: marked where flags are shown, never best below the accuracy
limit, and a lossless configuration preferred unless the study opted in."""

from tuner.results.best import pick_best
from tuner.results.flagdiff import flag_words
from tuner.results.lossy import accuracy_doc, accuracy_line
from tuner.spec.study import DEFAULT_OBJECTIVES
from tuner.trials.record import ACCURACY, TrialRecord

AUTO = {"kv_cache_dtype": "auto", "max_num_seqs": 256}
FP8 = {"kv_cache_dtype": "fp8", "max_num_seqs": 256}


def rec(n, flags, tput, agreement=None, limit=0.97):
    acc = None if agreement is None else {
        "role": "replay", "lossy": {"kv_cache_dtype": "fp8"}, "token_agreement": agreement,
        "logprob_diff": 0.01, "reference_trial": 0, "min_token_agreement": limit}
    cons = {"starts": 0.0, **({ACCURACY: limit - (1.0 if agreement is None else agreement)})}
    return TrialRecord(number=n, state="complete", values=(tput, 10.0), constraints=cons,
                       outcome="measured", flags=flags, accuracy=acc,
                       metrics={"output_throughput": tput, "p99_itl_ms": 10.0})


def test_flag_words_mark_lossy_values():
    assert flag_words({"kv_cache_dtype": "fp8"}) == "--kv-cache-dtype fp8 [lossy]"
    assert flag_words({"kv_cache_dtype": "auto"}) == "--kv-cache-dtype auto"


def test_a_trial_below_the_accuracy_limit_is_never_best():
    records = [rec(0, AUTO, 100.0), rec(1, FP8, 150.0, agreement=0.93)]
    pick = pick_best(records, DEFAULT_OBJECTIVES, {})
    assert pick.best.number == 0
    only = pick_best(records[1:], DEFAULT_OBJECTIVES, {})
    assert only.best is None and only.closest.number == 1 and ACCURACY in only.excess
    assert "INFEASIBLE" in accuracy_line(records[1]) and "0.930" in accuracy_line(records[1])


def test_lossless_is_preferred_unless_the_study_opted_in():
    records = [rec(0, AUTO, 100.0), rec(1, FP8, 150.0, agreement=0.99)]
    assert pick_best(records, DEFAULT_OBJECTIVES, {}, lossless_first=True).best.number == 0
    assert pick_best(records, DEFAULT_OBJECTIVES, {}).best.number == 1
    # nothing lossless meets the limits: the lossy one is still the answer
    assert pick_best(records[1:], DEFAULT_OBJECTIVES, {}, lossless_first=True).best.number == 1


def test_the_json_fields_and_the_line_name_the_lossy_flags_and_figures():
    good = rec(1, FP8, 150.0, agreement=0.99)
    assert accuracy_doc(good)["lossy_flags"] == {"kv_cache_dtype": "fp8"}
    assert accuracy_doc(good)["accuracy"]["token_agreement"] == 0.99
    assert accuracy_doc(rec(0, AUTO, 1.0)) == {"lossy_flags": {}, "lossless": True,
                                               "accuracy": None, "meets_accuracy": True}
    assert accuracy_line(good).startswith("LOSSY kv_cache_dtype=fp8: token agreement 0.990")
    assert "passed" in accuracy_line(good) and accuracy_line(rec(0, AUTO, 1.0)) == ""
    unchecked = TrialRecord(flags=FP8, accuracy={"role": "replay", "error": "no reference"})
    assert "not checked: no reference" in accuracy_line(unchecked)
