"""Lossy flags and the accuracy guard's figures as the results show them (pure).

Every place that shows a trial's flags marks the lossy values (``flag_words`` appends
``[lossy]``) and, next to them, what the guard measured: ``accuracy_line`` for text,
``accuracy_doc`` for JSON (``tuner best --format json``, the HTTP API).
"""

from __future__ import annotations

from typing import Any

from tuner.numerics import lossy_flags
from tuner.trials import TrialRecord
from tuner.trials.parts import Accuracy
from tuner.trials.record import ACCURACY

MARK = "[lossy]"


def is_lossy(r: TrialRecord) -> bool:
    return bool(lossy_flags(r.flags))


def accurate(r: TrialRecord) -> bool:
    """Meets the study's accuracy limit (true where the study has none)."""
    return float(r.constraints.get(ACCURACY, 0.0)) <= 0.0


def accuracy_line(r: TrialRecord) -> str:
    """'' for a lossless trial; else its lossy flags and the guard's verdict in one line."""
    lossy = lossy_flags(r.flags)
    if not lossy:
        return ""
    names = ", ".join(f"{k}={v}" for k, v in lossy.items())
    acc = r.accuracy or Accuracy()
    if acc.token_agreement is not None:
        diff = acc.logprob_diff
        text = (f"token agreement {acc.token_agreement:.3f}"
                + (f", logprob diff {diff:.4f}" if diff is not None else "")
                + f" vs trial {acc.reference_trial}")
        limit = acc.min_token_agreement
        if limit is not None:
            text += (f" (>= {limit:g}: passed)" if accurate(r)
                     else f" (< {limit:g}: INFEASIBLE)")
    elif acc.error:
        text = f"not checked: {acc.error} (INFEASIBLE)"
    else:
        text = "no accuracy check recorded"
    caveat = acc.caveat
    return f"LOSSY {names}: {text}" + (f"; {caveat}" if caveat else "")


def accuracy_doc(r: TrialRecord) -> dict[str, Any]:
    """JSON fields: the lossy flags and the guard's attribute (None for lossless trials)."""
    lossy = lossy_flags(r.flags)
    return {"lossy_flags": lossy, "lossless": not lossy,
            "accuracy": r.accuracy.to_json() if r.accuracy and lossy else None,
            "meets_accuracy": accurate(r)}
