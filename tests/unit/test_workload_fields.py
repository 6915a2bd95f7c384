"""The workload's fields are declared once, in ``tuner/loadgen/spec.py``: the study file's
[workload] and [measurement] are those models, the simulator reads the same one, and the
runner hands them to the load generator by field name. The study's "chat" is the load
generator's multi-turn, and nothing is copied by hand."""

import ast
from pathlib import Path

import pytest

from tuner.errors import UsageError
from tuner.loadgen import spec as loadgen
from tuner.loadgen.spec import DEFAULT_VOCAB_SIZE, LoadSpec, WorkloadSpec
from tuner.runner.plans import load_of, workload_of
from tuner.sim.workload import SimWorkload, from_study
from tuner.spec.study import MeasurementSection, WorkloadSection
from tuner.testing.studies import study_spec

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2] / "tuner"
MODELS = (loadgen.Requests, loadgen.Arrivals, loadgen.Stopping, loadgen.Workload,
          WorkloadSpec, LoadSpec)
FIELDS = {name for m in MODELS for name in m.model_fields}
# Classes outside loadgen/spec.py that may declare several of those names, and why.
ALLOWED = {
    ("tuner/loadgen/dispatch.py", "ShardPlan"): "one client process's share of a run, "
                                                "computed from a LoadSpec (its count, its "
                                                "duration), not a spelling of the workload",
}


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
    for name in WorkloadSpec.model_fields:
        if name in WorkloadSection.model_fields and name != "kind":
            assert getattr(w, name) == getattr(spec.workload, name), name
    for name in LoadSpec.model_fields:
        for section in (spec.workload, spec.measurement):
            if name in type(section).model_fields:
                assert getattr(load, name) == getattr(section, name), name
    assert load.early_stop and load.itl_ci == 0.2 and load.max_requests == 99


def test_the_simulator_takes_the_same_fields():
    spec = _spec(input_len=300, output_len=30, range_ratio=0.5, num_prefixes=2, prefix_len=64,
                 kind="shared-prefix", max_concurrency=12, num_requests=77, seed=5)
    sim = from_study(spec.workload)
    assert (sim.max_concurrency, sim.num_requests, sim.input_len, sim.output_len,
            sim.range_ratio, sim.num_prefixes, sim.prefix_len, sim.seed) == (
                12, 77, 300, 30, 0.5, 2, 64, 5)
    assert from_study(spec.workload, 10).num_requests == 10


def test_the_study_sections_are_the_load_generators_models():
    assert WorkloadSection is loadgen.Workload and SimWorkload is loadgen.Workload
    assert MeasurementSection is loadgen.Stopping
    assert set(WorkloadSection.model_fields) == (set(loadgen.Requests.model_fields)
                                                 | set(loadgen.Arrivals.model_fields))
    assert set(LoadSpec.model_fields) > set(loadgen.Arrivals.model_fields) | set(
        MeasurementSection.model_fields)
    assert set(WorkloadSpec.model_fields) > set(loadgen.Requests.model_fields)


def _declared(cls: type) -> set[str]:
    return set(cls.__dict__.get("__annotations__", {}))


def test_no_model_redeclares_a_field_of_its_bases():
    for name in FIELDS:
        owners = [m.__name__ for m in MODELS if name in _declared(m)]
        assert len(owners) == 1, (name, owners)


def workload_classes(tree: ast.AST, path: str) -> list[str]:
    """Classes in ``tree`` (outside loadgen/spec.py) declaring two or more workload fields."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
                     and isinstance(s.target, ast.Name)} & FIELDS
            if len(names) >= 2 and (path, node.name) not in ALLOWED:
                out.append(f"{path}: {node.name} declares {sorted(names)}")
    return out


def test_no_other_class_declares_the_workload_again():
    found = []
    for path in ROOT.rglob("*.py"):
        rel = str(path.relative_to(ROOT.parent))
        if rel != "tuner/loadgen/spec.py":
            found += workload_classes(ast.parse(path.read_text()), rel)
    assert found == []


def test_a_second_declaration_is_found():
    code = ast.parse("class SimWorkload:\n    concurrency: int = 1\n    input_len: int = 1\n"
                     "    output_len: int = 1\n")
    assert workload_classes(code, "tuner/sim/workload.py") == [
        "tuner/sim/workload.py: SimWorkload declares ['input_len', 'output_len']"]


def test_built_directly_a_bad_value_is_a_usage_error_naming_the_field():
    with pytest.raises(UsageError, match="^input_len: "):
        loadgen.build(SimWorkload, input_len=0)
    with pytest.raises(UsageError, match="^range_ratio: "):
        WorkloadSpec(range_ratio=2)
    with pytest.raises(UsageError, match="num_requests must be at least 1"):
        from_study(WorkloadSection(), 0)


# A [workload] and [measurement] as the study store wrote them before the one model (kind
# "chat", the field order of the study's own section), taken from such a study's spec.
OLD_STORED = {
    "workload": {"kind": "chat", "input_len": 200, "output_len": 20, "range_ratio": 0.0,
                 "num_prefixes": 0, "prefix_len": 0, "turns": 3, "dataset": None,
                 "endpoint": "completions", "max_concurrency": None, "request_rate": 4.0,
                 "burstiness": 1.0, "num_requests": 1000, "warmup_requests": 16, "seed": 0,
                 "max_client_lag_ms": 5.0, "min_gap_share": 0.9, "client_processes": 1},
    "measurement": {"early_stop": False, "throughput_ci": 0.02, "itl_ci": 0.1,
                    "max_requests": 99}}


def test_a_study_stored_before_the_one_model_still_opens(storage_url):
    from tuner.storage.studies import SPEC, create_study, open_study

    opened, _ = create_study(study_spec("old-chat"), storage_url, installed=None)
    old = {**opened.study.user_attrs[SPEC], **OLD_STORED}
    opened.study.set_user_attr(SPEC, old)
    spec = open_study("old-chat", storage_url).spec
    assert spec.workload.kind == "multi-turn" and spec.workload.turns == 3
    assert spec.workload.longest_request == 200 * 3 + 20 * 2 + 20  # as before: 660
    assert workload_of(spec).kind == "multi-turn"
    assert load_of(spec).request_rate == 4.0 and load_of(spec).max_requests == 99
