"""The accuracy guard on a trial's own server, after its benchmark (I/O; the rules are
``tuner.accuracy.guard``, the figures ``tuner.accuracy.figures``).

The default baseline of a guarded study stores the reference on the study (user attribute
``tuner.accuracy.reference``: the prompts, the completions' tokens and logprobs, the trial),
once: a later default (a re-run after a stop) keeps the first. A trial with a lossy value
replays the same prompts and records the figures; when the reference is not there yet
(another worker's default is still running) or its server does not answer, the trial is
recorded as not checked, which fails the accuracy limit. A default whose server does not
answer stays measured, with the error in its ``accuracy`` attribute and no reference stored.
"""

from __future__ import annotations

import optuna

from tuner.accuracy import client, guard
from tuner.accuracy.figures import compare
from tuner.accuracy.prompts import prompt_set
from tuner.errors import AccuracyError
from tuner.spec.study import StudySpec
from tuner.trials import record
from tuner.trials.record import TrialRecord

REFERENCE_ATTR = "tuner.accuracy.reference"


class Guard:
    """Runs the guard for one worker's study."""

    def __init__(self, study: optuna.Study, timeout_s: float = 300.0) -> None:
        self.study = study
        self.timeout_s = timeout_s

    def role(self, spec: StudySpec, told: TrialRecord) -> str | None:
        return guard.role(spec, told.flags, told.baseline)

    def check(self, spec: StudySpec, url: str, model: str, told: TrialRecord,
              number: int) -> TrialRecord:
        """``told`` with the guard's attribute (and constraint) when it applies."""
        role = self.role(spec, told)
        if role is None:
            return told
        prompts = prompt_set(spec.accuracy.prompts)
        stored = self.study.user_attrs.get(REFERENCE_ATTR)
        if role == guard.REFERENCE:
            if stored is not None:
                return told  # recorded once per study
            try:
                done = client.complete_all(url, model, prompts, spec.accuracy.max_tokens,
                                           self.timeout_s)
            except AccuracyError as e:  # the default stays measured; lossy trials unchecked
                return record.with_accuracy(spec, told, {**guard.reference_attrs(spec, number),
                                                         "error": str(e)})
            self.study.set_user_attr(REFERENCE_ATTR, guard.reference_payload(
                number, prompts, spec.accuracy.max_tokens, done))
            return record.with_accuracy(spec, told, guard.reference_attrs(spec, number))
        if stored is None or list(stored.get("prompts", ())) != list(prompts):
            why = ("no reference yet: the default baseline has not recorded one"
                   if stored is None else "the reference holds other prompts")
            return record.with_accuracy(spec, told, guard.unchecked_attrs(spec, told.flags, why))
        try:
            done = client.complete_all(url, model, prompts, int(stored["max_tokens"]),
                                       self.timeout_s)
        except AccuracyError as e:
            return record.with_accuracy(spec, told, guard.unchecked_attrs(spec, told.flags,
                                                                          str(e)))
        figures = compare(guard.reference_completions(stored), done)
        return record.with_accuracy(spec, told, guard.replay_attrs(
            spec, told.flags, figures, int(stored["trial"])))
