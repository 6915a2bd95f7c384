"""tuner.accuracy.figures on hand-worked examples."""

import pytest

from tuner.accuracy.figures import Completion, agreed_prefix, agreement, compare


def C(tokens, logprobs=()):
    return Completion(tuple(tokens.split()), tuple(logprobs))


def test_identical_completions_agree_everywhere():
    ref = C("a b c d", (-0.1, -0.2, -0.3, -0.4))
    assert agreed_prefix(ref, ref) == 4 and agreement(ref, ref) == 1.0
    f = compare([ref], [ref])
    assert (f.token_agreement, f.logprob_diff, f.diverged) == (1.0, 0.0, 0)


def test_agreement_is_the_share_before_the_first_divergence():
    # a b | x d: diverges at position 2 of 4; the d after it does not count back
    assert agreement(C("a b c d"), C("a b x d")) == 0.5
    assert agreement(C("x b c d"), C("a b c d")) == 0.0
    # one ends early: a divergence where the other goes on (3 of 4)
    assert agreement(C("a b c d"), C("a b c")) == 0.75
    assert agreement(C("a b c"), C("a b c d")) == 0.75
    assert agreement(C(""), C("")) == 1.0


def test_prompt_set_agreement_is_the_mean_over_prompts():
    # prompt 1 agrees 4/4, prompt 2 2/4, prompt 3 1/2: (1 + 0.5 + 0.5) / 3
    f = compare([C("a b c d"), C("a b c d"), C("p q")],
                [C("a b c d"), C("a b x y"), C("p r")])
    assert f.token_agreement == pytest.approx(2 / 3)
    assert (f.prompts, f.diverged, f.agreed_tokens, f.tokens) == (3, 2, 7, 10)


def test_logprob_difference_is_pooled_over_the_agreed_prefix_only():
    # agreed: positions 0-1 of prompt 1 (|-0.5+0.4| = 0.1, |-1.0+1.3| = 0.3) and position 0
    # of prompt 2 (|-2.0+2.2| = 0.2); position 2 of prompt 1 diverged (9.9 ignored)
    refs = [C("a b c", (-0.5, -1.0, -0.1)), C("p q", (-2.0, -0.7))]
    gots = [C("a b x", (-0.4, -1.3, -9.9)), C("p r", (-2.2, -0.1))]
    f = compare(refs, gots)
    assert f.logprob_diff == pytest.approx((0.1 + 0.3 + 0.2) / 3)
    assert f.token_agreement == pytest.approx((2 / 3 + 1 / 2) / 2)


def test_no_agreed_position_or_missing_logprobs_give_no_difference():
    assert compare([C("a", (-1.0,))], [C("b", (-1.0,))]).logprob_diff is None
    assert compare([C("a b", (None, -1.0))], [C("a b", (-0.5, -1.5))]).logprob_diff == 0.5


def test_the_sets_must_match():
    with pytest.raises(ValueError):
        compare([C("a")], [])
    with pytest.raises(ValueError):
        compare([], [])
