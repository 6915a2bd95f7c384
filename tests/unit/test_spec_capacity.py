"""A capacity study's SLO reaches its ladder whole, and options that do not apply to a
ladder are refused, not ignored (tuner.spec, tuner.runner.plans)."""

from __future__ import annotations

import pydantic
import pytest

from tuner.runner.plans import benchmark_plan, slo_of
from tuner.spec import StudySpec
from tuner.testing.capacity_studies import capacity_spec

pytestmark = pytest.mark.unit


def with_(spec: StudySpec, section: str, **fields) -> StudySpec:
    doc = spec.model_dump()
    doc[section] = {**doc[section], **fields}
    return StudySpec.model_validate(doc)


def test_every_slo_limit_reaches_the_ladders_verdict():
    spec = with_(capacity_spec("cap"), "slo", p99_tpot_ms=40.0, p99_e2el_ms=9000.0)
    judged = dict(slo_of(spec).judged(spec.capacity.tolerance).limits)
    assert judged == {"p99_ttft_ms": spec.slo.p99_ttft_ms, "p99_itl_ms": spec.slo.p99_itl_ms,
                      "p99_tpot_ms": 40.0, "p99_e2el_ms": 9000.0}
    plan = benchmark_plan(spec)
    assert plan.slo.tpot_ms == 40.0 and plan.slo.e2el_ms == 9000.0  # goodput counts them


@pytest.mark.parametrize("fields", [{"confirm": 2}, {"confirm_default": 1}])
def test_confirmation_runs_are_refused_on_a_ladder_study(fields):
    with pytest.raises(pydantic.ValidationError, match="search.confirm does not apply"):
        with_(capacity_spec("cap"), "search", **fields)
