"""The study file's [workload] reaches the load generator and the simulator field by name:
every field they share carries over, the study's "chat" is the load generator's
multi-turn, and nothing is copied by hand."""

import dataclasses

from tuner.loadgen.spec import DEFAULT_VOCAB_SIZE, LoadSpec, WorkloadSpec
from tuner.runner.measure import load_of, workload_of
from tuner.sim.workload import from_study
from tuner.study.spec import MeasurementSection, WorkloadSection
from tuner.testing.studies import study_spec


def _spec(**workload):
    base = study_spec("fields")
    return base.model_copy(update={
        "workload": WorkloadSection(**workload),
        "measurement": MeasurementSection(early_stop=True, itl_ci=0.2, max_requests=99)})


def test_every_shared_field_carries_over():
    spec = _spec(kind="chat", turns=3, input_len=200, output_len=20, range_ratio=0.25,
                 seed=7, max_concurrency=8, num_requests=40, warmup_requests=2,
                 endpoint="chat", client_processes=1, max_client_lag_ms=9.0)
    w, load = workload_of(spec), load_of(spec)
    assert w.kind == "multi-turn" and w.vocab_size == (spec.model.vocab_size
                                                       or DEFAULT_VOCAB_SIZE)
    for f in dataclasses.fields(WorkloadSpec):
        if f.name in WorkloadSection.model_fields and f.name != "kind":
            assert getattr(w, f.name) == getattr(spec.workload, f.name), f.name
    for f in dataclasses.fields(LoadSpec):
        for section in (spec.workload, spec.measurement):
            if f.name in type(section).model_fields:
                assert getattr(load, f.name) == getattr(section, f.name), f.name
    assert load.early_stop and load.itl_ci == 0.2 and load.max_requests == 99


def test_the_simulator_takes_the_same_fields():
    spec = _spec(input_len=300, output_len=30, range_ratio=0.5, num_prefixes=2, prefix_len=64,
                 kind="shared-prefix", max_concurrency=12, num_requests=77, seed=5)
    sim = from_study(spec.workload)
    assert (sim.concurrency, sim.num_requests, sim.input_len, sim.output_len, sim.range_ratio,
            sim.num_prefixes, sim.prefix_len, sim.seed) == (12, 77, 300, 30, 0.5, 2, 64, 5)
    assert from_study(spec.workload, 10).num_requests == 10
