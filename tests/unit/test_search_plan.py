"""tuner.search: warm start and the sampler choice (no simulator involved); the
benchmark's plans (bench/contenders/plan.py) build the study's sampler."""

import subprocess
import sys
import types
from pathlib import Path

import optuna
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from contenders.plan import PLANS, SearchPlan  # noqa: E402
from tuner.errors import SamplerUnavailable  # noqa: E402
from tuner.search import warm_start  # noqa: E402
from tuner.search.sampler import AUTO, make_sampler, resolve  # noqa: E402
from tuner.space import baselines, build_space  # noqa: E402
from tuner.storage import load_study_file  # noqa: E402


def test_auto_is_a_known_sampler_and_the_auto_plan_uses_it():
    assert resolve("auto") == AUTO
    assert PLANS["auto"].sampler == AUTO
    assert isinstance(make_sampler("auto", 0), type(PLANS["auto"].sampler_for(0)))


def test_unknown_sampler_names_the_known_ones():
    with pytest.raises(ValueError, match="known: auto, front, tpe"):
        make_sampler("cmaes", 0)


def test_plan_passes_startup_and_constant_liar_to_tpe():
    s = SearchPlan("tpe", n_startup_trials=5, constant_liar=False).sampler_for(1)
    assert isinstance(s, optuna.samplers.TPESampler)
    assert s._n_startup_trials == 5 and s._constant_liar is False
    assert make_sampler("tpe", 1)._constant_liar is True


def test_a_sampler_package_already_imported_with_no_spec_counts_as_installed(monkeypatch):
    # optuna_integration, once imported, is a lazy module whose __spec__ is None:
    # importlib.util.find_spec raised ValueError for the second BoTorch study of a process
    from tuner.search import sampler

    lazy = types.ModuleType("tuner_test_lazy_pkg")
    lazy.__spec__ = None
    monkeypatch.setitem(sys.modules, "tuner_test_lazy_pkg", lazy)
    monkeypatch.setitem(sampler.NEEDS, "gp", (("tuner_test_lazy_pkg", "lazy-pkg"),))
    sampler.require("gp")
    monkeypatch.setitem(sampler.NEEDS, "gp", (("tuner_test_absent_pkg", "absent-pkg"),))
    with pytest.raises(SamplerUnavailable, match="pip install absent-pkg"):
        sampler.require("gp")


def test_warm_start_asks_the_baselines_first_as_given(study_file):
    spec = load_study_file(study_file('[model]\npath = "models/llama3-8b"\n'))
    space = build_space(spec)
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=make_sampler("tpe", 0))
    assert warm_start(study, space) == 3
    expected = baselines(space)
    for b in expected:
        trial = study.ask(space.distributions())
        assert trial.user_attrs["baseline"] == b.name
        assert trial.params == {p.name: b.flags[p.name] for p in space.params}
        study.tell(trial, [1.0, 1.0])
    assert "baseline" not in study.ask(space.distributions()).user_attrs


def test_a_study_file_accepts_exactly_the_samplers_make_sampler_knows():
    from typing import get_args

    from tuner.search.sampler import NAMES
    from tuner.spec.study import SearchSection

    accepted = set(get_args(SearchSection.model_fields["sampler"].annotation))
    assert accepted == {"auto", *NAMES}



@pytest.mark.parametrize("modules", ["tuner.search", "tuner.search.front",
                                     "tuner.search.sampler"])
def test_the_search_code_does_not_import_the_simulator_the_runner_or_storage(modules):
    never = ("tuner.sim", "tuner.runner", "tuner.engine", "tuner.storage")
    code = (f"import sys, {modules}; "
            f"print(sorted(m for m in sys.modules if m.startswith({never!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
