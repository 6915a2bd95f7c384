"""What users copy: the serve line, the --config YAML, the table, and the escaped report."""

from __future__ import annotations

import random

import yaml

from tuner.results import config_yaml, serve_argv, summarise
from tuner.results.report import render
from tuner.results.table import pareto_text
from tuner.space import build_space
from tuner.testing.studies import metrics_for, study_spec
from tuner.trials import record
from tuner.trials import TrialRecord

SPEC = study_spec("render-test").model_copy(
    update={"description": "<script>alert('x')</script> & friends"})
SPACE = build_space(SPEC)
TUNED = {**SPACE.defaults, "max_num_batched_tokens": 4096, "enable_prefix_caching": False,
         "enforce_eager": False, "gpu_memory_utilization": 0.93}


def measured(number: int, flags: dict, baseline: str | None = None) -> TrialRecord:
    told = record.measured(SPEC, metrics_for(flags, random.Random(number)), TrialRecord())
    return TrialRecord(number=number, state="complete", outcome=record.MEASURED,
                       values=told.values, constraints=told.constraints, flags=flags,
                       metrics=told.metrics, baseline=baseline)


RECORDS = (
    measured(0, dict(SPACE.defaults), "default"),
    measured(1, TUNED),
    TrialRecord(number=2, state="fail", outcome=record.FAILED, flags=TUNED,
                failure={"class": "crashed", "message": "<b>boom</b> & 'quotes'"}),
)


def test_serve_line_writes_every_flag_explicitly():
    argv = serve_argv(SPEC, TUNED)
    assert argv[:3] == ["vllm", "serve", SPEC.model.path]
    assert argv[3:7] == ["--served-model-name", "llama3-8b", "--dtype", "bfloat16"]
    assert "--no-enable-prefix-caching" in argv and "--no-enforce-eager" in argv
    assert "--enable-chunked-prefill" in argv
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.93"
    assert "--load-format" not in argv  # benchmark-only arguments stay out


def test_config_yaml_has_long_option_names_and_real_booleans():
    text = config_yaml(SPEC, TUNED, ["a comment"])
    assert text.startswith("# a comment\n")
    data = yaml.safe_load(text)
    assert data["model"] == SPEC.model.path and data["dtype"] == "bfloat16"
    assert data["max-num-batched-tokens"] == 4096
    assert data["enable-prefix-caching"] is False and data["enforce-eager"] is False
    assert data["gpu-memory-utilization"] == 0.93
    assert {k.replace("-", "_") for k in data} - {"model", "served_model_name", "dtype"} == \
        set(TUNED)


def test_pareto_text_marks_baselines_and_gains():
    s = summarise(SPEC, SPACE, RECORDS)
    text = pareto_text(s)
    assert "3 trials: 2 measured, 1 failed" in text
    front = {r.record.number for r in s.front}
    assert "0 [default]" in text
    if 1 in front:
        assert "--max-num-batched-tokens 4096" in text and "--no-enable-prefix-caching" in text


def test_report_escapes_every_study_text():
    page = render(summarise(SPEC, SPACE, RECORDS), [])
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<b>boom</b>" not in page and "&lt;b&gt;boom&lt;/b&gt;" in page
    assert "Default baseline" in page and "vllm serve" in page


def test_a_second_trial_of_the_same_flags_shows_beside_the_first():
    again = measured(3, TUNED)
    s = summarise(SPEC, SPACE, (*RECORDS, again))
    assert [r.record.number for r in s.front] == [1]  # one row per configuration: its first
    assert s.front[0].repeats == (again,) and s.default.repeats == ()
    tput, itl = again.metric("output_throughput"), again.metric("p99_itl_ms")
    assert (f"trial 1: also trial 3 (output_throughput {tput:,.0f}, p99_itl_ms {itl:.1f})"
            in pareto_text(s))
    assert "also trial" not in pareto_text(summarise(SPEC, SPACE, RECORDS))


def test_the_report_lists_a_second_trial_of_the_same_flags():
    page = render(summarise(SPEC, SPACE, (*RECORDS, measured(3, TUNED))), [])
    assert "<li>trial 1: also trial 3 (output_throughput" in page
    assert "also trial" not in render(summarise(SPEC, SPACE, RECORDS), [])
