"""The accuracy guard's requests on the real vLLM CPU build, with dummy weights and a scripted
reference (no real weights run here: docs/accuracy.md).

vLLM answers the guard's greedy requests (temperature 0, logprobs, ignore_eos, token ids as
tokens) with every token and its logprob; a replay on the same server agrees with itself;
against a reference scripted to diverge at known positions the guard records exactly the
agreement worked out by hand, with the dummy-weights caveat, and the trial fails its limit.
"""

from __future__ import annotations


import optuna
import pytest

from tuner.accuracy import guard
from tuner.accuracy.client import complete_all
from tuner.accuracy.figures import Completion, compare
from tuner.accuracy.prompts import prompt_set
from tuner.runner.guard import REFERENCE_ATTR, Guard
from tuner.storage import load_study_file
from tuner.trials import record
from tuner.trials.record import TrialRecord

pytestmark = pytest.mark.e2e

PROMPTS, TOKENS = 4, 16
STUDY = '''
[model]
path = "{model}"
context_len = 2048
[workload]
input_len = 32
output_len = 16
[space]
lossy = ["kv_cache_dtype"]
[accuracy]
prompts = {prompts}
max_tokens = {tokens}
'''


def _replay(tiny_server, tiny_model_dir):
    # one request at a time: the same batch shape each time, so greedy decoding repeats
    return complete_all(tiny_server.server.url, str(tiny_model_dir), prompt_set(PROMPTS),
                        TOKENS, threads=1)


def test_vllm_answers_the_guards_requests_and_agrees_with_itself(tiny_server, tiny_model_dir):
    first = _replay(tiny_server, tiny_model_dir)
    assert all(len(c.tokens) == TOKENS and len(c.logprobs) == TOKENS for c in first)
    assert all(t.startswith("token_id:") for c in first for t in c.tokens)
    assert all(v is not None and v <= 0 for c in first for v in c.logprobs)
    again = compare(first, _replay(tiny_server, tiny_model_dir))
    assert again.token_agreement == 1.0 and again.logprob_diff == pytest.approx(0, abs=1e-4)


def test_the_guard_scores_a_replay_against_a_scripted_reference(
        tiny_server, tiny_model_dir, study_file):
    real = _replay(tiny_server, tiny_model_dir)
    # scripted: prompt 0 diverges at position 8, prompt 1 at 0, prompts 2-3 agree
    scripted = [Completion(c.tokens[:cut] + ("token_id:-1",) + c.tokens[cut + 1:], c.logprobs)
                if cut is not None else c for c, cut in zip(real, (8, 0, None, None))]
    spec = load_study_file(study_file(STUDY.format(model=tiny_model_dir, prompts=PROMPTS,
                                                   tokens=TOKENS)))
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.set_user_attr(REFERENCE_ATTR, guard.reference_payload(
        0, prompt_set(PROMPTS), TOKENS, scripted))
    flags = {"kv_cache_dtype": "fp8"}  # as a lossy trial's record says (the server: auto)
    told = record.measured(spec, {"output_throughput": 1.0, "p99_itl_ms": 1.0},
                           TrialRecord(flags=flags))
    checked = Guard(study).check(spec, tiny_server.server.url, str(tiny_model_dir), told, 5)
    acc = checked.accuracy
    assert acc.token_agreement == pytest.approx((8 / 16 + 0 + 1 + 1) / 4)
    assert acc.diverged == 2 and acc.reference_trial == 0 and acc.passed is False
    assert acc.caveat == guard.DUMMY  # dummy weights: says nothing about quality
    assert checked.constraints[record.ACCURACY] == pytest.approx(0.97 - 0.625)
