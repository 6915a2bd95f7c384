"""The simulator's greedy answers: deterministic everywhere, exact for 'auto', a modelled
divergence for a lossy KV-cache dtype; its completions reply carries vLLM's logprobs."""

import json
import subprocess
import sys

from tuner.accuracy.figures import Completion, compare
from tuner.accuracy.prompts import prompt_set
from tuner.sim import greedy, openai


def _answers(dtype):
    return [Completion(*map(tuple, greedy.answer(json.dumps(p), 64, dtype)))
            for p in prompt_set(32)]


def test_the_same_prompt_gets_the_same_answer_in_another_process():
    code = ("import json; from tuner.sim import greedy; "
            "print(json.dumps(greedy.answer('x y', 8, 'fp8')))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(runs) == 1 and json.loads(runs.pop()) == list(greedy.answer("x y", 8, "fp8"))


def test_auto_is_exact_and_fp8_diverges_in_the_second_half_of_some_answers():
    exact, lossy = _answers("auto"), _answers("fp8")
    assert compare(exact, _answers("auto")).token_agreement == 1.0
    f = compare(exact, lossy)
    assert 0 < f.diverged < 32 and 0.85 < f.token_agreement < 0.97
    assert abs(f.logprob_diff - greedy.LOGPROB_SHIFT) < 1e-9
    for p, e, l in zip(prompt_set(32), exact, lossy):
        cut = greedy.divergence(json.dumps(p), 64, "fp8")
        assert (cut is None) == (e.tokens == l.tokens)
        if cut is not None:
            assert 32 <= cut < 64 and e.tokens[:cut] == l.tokens[:cut]
            assert e.tokens[cut] != l.tokens[cut]


def test_a_completions_reply_has_logprobs_only_when_asked():
    body = {"model": "m", "prompt": "The capital of France is", "max_tokens": 4}
    plain = openai.full_response(openai.parse("completions", body), "m", 4)
    assert plain["choices"][0]["logprobs"] is None
    asked = openai.parse("completions", {**body, "logprobs": 1, "temperature": 0})
    reply = openai.full_response(asked, "m", 4, "fp8")
    lp = reply["choices"][0]["logprobs"]
    tokens, values = greedy.answer(json.dumps(body["prompt"]), 4, "fp8")
    assert lp["tokens"] == tokens and lp["token_logprobs"] == values
    assert reply["choices"][0]["text"] == "".join(tokens)
