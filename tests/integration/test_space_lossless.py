"""Lossless by default, through the CLI: no example study proposes a lossy value over 2,000
proposals unless it opts in; a study file that fixes or ranges one without the opt-in is a
usage error (exit 2, one line naming the key and the fix)."""

import json
import random
import re
from pathlib import Path

import optuna
import pytest

from tuner.search import warm_start
from tuner.search.sampler import make_sampler
from tuner.space import build_space
from tuner.space.draw import draw
from tuner.numerics import lossy_flags
from tuner.storage import load_study_file
from tuner.testing.examples import ready_study_files

STUDIES = ready_study_files()  # the template has placeholders (test_first_hour_cli)
N = 2000


def _copy(path: Path, tmp_path: Path, opt_in: bool = False) -> Path:
    text = path.read_text().replace('path = "models/', f'path = "{path.parent}/models/')
    text = text.replace('path = "../.tuner', f'path = "{path.parent}/../.tuner')
    if opt_in:  # (a study without a fixed kv_cache_dtype)
        text = (re.sub(r"(?m)^\[space\]$", '[space]\nlossy = ["kv_cache_dtype"]', text, count=1)
                if re.search(r"(?m)^\[space\]$", text)
                else text + '\n[space]\nlossy = ["kv_cache_dtype"]\n')
    out = tmp_path / f"{path.stem}{'-lossy' if opt_in else ''}.toml"
    out.write_text(text)
    return out


def _opts_in(path: Path) -> bool:
    return bool(load_study_file(path).space.lossy)


@pytest.mark.parametrize("path", STUDIES, ids=[s.stem for s in STUDIES])
def test_no_study_proposes_a_lossy_value_unless_it_opts_in(path, tmp_path, run_cli,
                                                           shared_engine_answer):
    copy = _copy(path, tmp_path)
    shared_engine_answer(copy)
    code, out, err = run_cli("space", "sample", copy, "-n", str(N), "--json", "--seed", "7")
    assert code == 0, err
    shown = [json.loads(line) for line in out.splitlines()]
    space = build_space(load_study_file(copy))
    raw = [draw(space, random.Random(7 + i)) for i in range(N)]  # before repair, too
    lossy = [f for f in shown + raw if lossy_flags(f)]
    if _opts_in(copy):
        assert lossy  # an opted-in flag is tuned: its lossy values are reachable
    else:
        assert len(shown) > N * 0.9 and lossy == [], lossy[:1]


def test_the_same_study_opted_in_proposes_fp8(tmp_path, run_cli):
    copy = _copy(STUDIES[[s.stem for s in STUDIES].index("llama3-8b-h200")], tmp_path, True)
    code, out, err = run_cli("space", "sample", copy, "-n", str(N), "--json")
    assert code == 0, err
    dtypes = {json.loads(line)["kv_cache_dtype"] for line in out.splitlines()}
    assert dtypes == {"auto", "fp8"}


def test_the_default_sampler_never_proposes_fp8_in_a_lossless_space(study_file):
    """The space has no fp8 to give, whatever the sampler proposes."""
    space = build_space(load_study_file(study_file('[model]\npath = "models/llama3-8b"\n')))
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=make_sampler("auto", 0))
    warm_start(study, space)
    dists = space.distributions()
    for _ in range(30):
        t = study.ask(dists)
        study.tell(t, [t.params["max_num_batched_tokens"] / 100, t.params["max_num_seqs"] / 10])
    assert {t.params["kv_cache_dtype"] for t in study.trials} == {"auto"}


@pytest.mark.parametrize("text,key", [
    ('[space]\nfixed = { kv_cache_dtype = "fp8" }\n', "space.fixed.kv_cache_dtype"),
    ('[space.ranges.kv_cache_dtype]\nchoices = ["auto", "fp8"]\n',
     "space.ranges.kv_cache_dtype"),
])
@pytest.mark.parametrize("command", [("space", "show"), ("study", "create")])
def test_a_lossy_value_without_the_opt_in_exits_2_naming_key_and_fix(
        text, key, command, study_file, run_cli, tmp_path):
    path = study_file('[model]\npath = "models/llama3-8b"\n' + text)
    extra = ("--storage", f"sqlite:///{tmp_path}/x.db") if command[0] == "study" else ()
    code, out, err = run_cli(*command, path, *extra)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert key in lines[0] and 'lossy = ["kv_cache_dtype"]' in lines[0], lines[0]
