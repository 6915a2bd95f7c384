"""tuner.trials.record: one typed record, every key spelled once, old studies still load."""

import dataclasses
import json

import optuna
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from tuner.trials import from_frozen, queries, record
from tuner.trials.record import Outcome, TrialRecord

# The user attributes of a measured trial as tuner 0.x wrote them (a dict, keys in prose),
# plus one key this version does not know.
OLD = {
    "outcome": "measured", "flags": {"max_num_seqs": 64}, "launch": {"max_num_seqs": 64},
    "command": ["vllm", "serve", "--max-num-seqs", "64"], "baseline": "default",
    "repaired": ["chunked-budget"], "metrics": {"output_throughput": 3000.0, "completed": 100},
    "server": {"preemptions": 0}, "noise": {"output_throughput": 0.01},
    "client": {"valid": True}, "failures": {}, "rejected_runs": ["lag"],
    "kv_cache_tokens": 920192, "vllm_version": "0.11.0", "gpu_name": "NVIDIA H200",
    "engine": "vllm", "host": "h", "worker": "h-1", "gpus": [0], "log": "/tmp/t.log",
    "phases": {"start": 50.0, "total": 99.0}, "vllm_bench": {"completed": 100},
    "some_later_key": {"kept": True},
}


def test_old_user_attrs_load_and_are_written_back_unchanged():
    r = TrialRecord.from_user_attrs(OLD)
    assert r.outcome is Outcome.MEASURED and r.command == ("vllm", "serve", "--max-num-seqs",
                                                           "64")
    assert r.gpus == (0,) and r.repaired == ("chunked-budget",) and r.kv_cache_tokens == 920192
    assert r.extra == {"some_later_key": {"kept": True}}
    written = r.to_user_attrs()
    assert written == OLD
    assert json.loads(json.dumps(written)) == written


def test_fields_at_their_default_are_not_written():
    assert TrialRecord().to_user_attrs() == {}
    assert TrialRecord(stopped=True, outcome="stopped").to_user_attrs() == {
        "outcome": "stopped", "stopped": True}


def test_builders_keep_the_base_and_set_the_outcome():
    base = TrialRecord(flags={"a": 1}, worker="w")
    measured = record.measured(_spec(), {"output_throughput": 10.0, "p99_itl_ms": 5.0}, base)
    assert measured.state == "complete" and measured.outcome == "measured"
    assert measured.worker == "w" and measured.values == (10.0, 5.0)
    dup = record.duplicate(dataclasses.replace(measured, number=3), TrialRecord(worker="x"))
    assert dup.duplicate_of == 3 and dup.metrics == measured.metrics and dup.worker == "x"
    assert dup.values == measured.values and dup.outcome == Outcome.DUPLICATE
    stopped = record.stopped(base)
    assert stopped.state == "fail" and stopped.stopped and stopped.values is None


def test_from_frozen_reads_optunas_fields_and_the_attributes():
    t = optuna.trial.create_trial(
        state=TrialState.COMPLETE, values=[3000.0, 90.0], params={"max_num_seqs": 64},
        distributions={"max_num_seqs": IntDistribution(8, 1024)}, user_attrs=OLD,
        constraints={"starts": 0.0})
    r = from_frozen(t)
    assert r.state == "complete" and r.values == (3000.0, 90.0) and r.measured
    assert queries.default_baseline([r]) is r
    assert queries.already_measured([r], {"max_num_seqs": 64}, exclude=99) is r
    assert queries.already_measured([r], {"max_num_seqs": 64}, exclude=r.number) is None


def test_counted_and_best_value_over_records():
    recs = [TrialRecord(number=0, state="complete", outcome="measured", values=(5.0, 1.0),
                        constraints={"starts": 0.0}),
            TrialRecord(number=1, state="complete", outcome="measured", values=(9.0, 1.0),
                        constraints={"slo:p99_itl_ms": 2.0}),          # misses its SLO
            TrialRecord(number=2, state="complete", outcome="duplicate", values=(5.0, 1.0)),
            TrialRecord(number=3, state="fail", outcome="stopped"),
            TrialRecord(number=4, state="fail", outcome="failed"),
            TrialRecord(number=5, state="running"), TrialRecord(number=6, state="waiting")]
    assert queries.counted(recs) == 4  # 0, 1, 4 and the running one
    assert queries.best_value(recs, "maximize") == 5.0
    assert queries.best_value(recs[2:], "maximize") is None


def _spec():
    from tuner.testing.studies import study_spec

    return study_spec("record-test")
