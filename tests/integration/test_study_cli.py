"""The CLI at the edge: malformed study files, and 10,000 proposals through the rules."""

import importlib.util
import itertools
import json
import re
from pathlib import Path

import pytest

from tuner.space import build_space
from tuner.storage import load_study_file
from tuner.testing.examples import ready_study_files

STUDIES = ready_study_files()  # the template has placeholders (test_first_hour_cli)

BAD = [
    ('[model]\npath = "models/llama3-8b"\n[workload]\ninput_len = -5\n', "workload.input_len"),
    ('[model]\npath = "models/llama3-8b"\n[workload]\nkind = "poisson"\n', "workload.kind"),
    ('[model]\npath = "models/llama3-8b"\nbogus = 1\n', "bogus"),
    ('[workload]\ninput_len = 5\n', "model"),
    ('[model]\npath = "models/llama3-8b"\n[space]\nrules = "old"\n', "space.rules"),
    ('[model]\npath = "models/llama3-8b"\n[[objectives]]\nmetric = "speed"\n'
     'direction = "maximize"\n', "objectives.0.metric"),
    ('[model]\npath = "nowhere"\n', "model.path"),
    ('[model\n', "not valid TOML"),
]


@pytest.mark.parametrize("text,key", BAD)
def test_malformed_study_file_exits_2_naming_the_key(text, key, study_file, run_cli, tmp_path):
    path = study_file(text, "bad.toml")
    code, out, err = run_cli("study", "create", path, "--storage", f"sqlite:///{tmp_path}/x.db")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and key in lines[0], err


@pytest.mark.skipif(importlib.util.find_spec("optuna_integration") is not None
                    and importlib.util.find_spec("botorch") is not None,
                    reason="botorch is installed here")
def test_a_botorch_study_without_botorch_exits_2_naming_the_package(study_file, run_cli,
                                                                    tmp_path):
    path = study_file('[model]\npath = "models/llama3-8b"\n[search]\nsampler = "botorch"\n',
                      "botorch.toml")
    url = f"sqlite:///{tmp_path}/x.db"
    code, out, err = run_cli("study", "create", path, "--storage", url)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "botorch" in lines[0] and "pip install" in lines[0], err
    code, out, _ = run_cli("study", "list", "--storage", url)
    assert code == 0 and "no studies" in out  # nothing was created


def test_unknown_parameter_in_space_is_a_usage_error(study_file, run_cli, tmp_path):
    path = study_file('[model]\npath = "models/llama3-8b"\n[space]\nfixed = { max_batch = 4 }\n')
    code, _, err = run_cli("space", "show", path)
    assert code == 2 and "max_batch" in err and "known:" in err


def test_space_show_lists_flags_and_rules(run_cli):
    code, out, _ = run_cli("space", "show", STUDIES[0])
    assert code == 0 and "--max-num-batched-tokens" in out and "rule set:" in out


def _variant(path: Path, rules: str, tmp_path: Path) -> Path:
    text = re.sub(r'(?m)^rules = ".*"$', f'rules = "{rules}"', path.read_text())
    if 'rules = "' not in text:
        text += f'\n[space]\nrules = "{rules}"\n'
    text = text.replace('path = "models/', f'path = "{path.parent}/models/')
    text = text.replace('path = "../.tuner', f'path = "{path.parent}/../.tuner')
    out = tmp_path / f"{path.stem}-{rules}.toml"
    out.write_text(text)
    return out


CASES = [(s, r) for s in STUDIES for r in ("article", "vllm-v1")]


@pytest.mark.parametrize("path,rules", CASES, ids=[f"{s.stem}-{r}" for s, r in CASES])
def test_ten_thousand_samples_break_no_rule(path, rules, tmp_path, run_cli,
                                           shared_engine_answer):
    variant = _variant(path, rules, tmp_path)
    shared_engine_answer(variant)
    code, out, err = run_cli("space", "sample", variant, "-n", "10000", "--json")
    assert code == 0, err
    space = build_space(load_study_file(variant))
    flags = [json.loads(line) for line in out.splitlines()]
    assert len(flags) > 9000  # the rest were infeasible and are left out, never shown
    assert all(space.rules.violations(f, space.context) == [] for f in flags)
    bools = [p.name for p in space.params if p.kind == "bool"]
    seen = {tuple(f[b] for b in bools) for f in flags}
    allowed = {c for c in itertools.product((False, True), repeat=len(bools))
               if not (rules == "article" and dict(zip(bools, c)).get("enable_prefix_caching")
                       and dict(zip(bools, c)).get("enable_chunked_prefill"))}
    assert seen == allowed
