"""Imports run one way, and Optuna's private state is reached from one module only.

The layers, lowest first: a package may import only packages of a lower rank (and itself):

    errors, optuna_adapter, settings, limits,  0
      clock (the trial loop's time),
      numerics (which flag values are lossy),
      slo (the SLO's verdict and the capacity fit)
    home, trials, loadgen, modelfolder,        1   the trial record is the hub: every layer
      installed (the engine's own answer)          above reads it, it reads none of them
    spec, space, sim, capacity                 2   the study file's schema; the flag space;
                                                   a load ladder run into a trial's curve
    storage, engine                            3   stored studies; the engine's processes
    search, accuracy                           4   samplers, warm start; the accuracy
                                                   guard's rules, figures and client
    runner, results                            5   the trial loop; results read trials,
                                                   never the runner
    service                                    6   status, launch, API: runner + results
    testing, cli, __main__                     7+  fixtures and thin commands on top

There are no exceptions. Two rules go further than the ranks: ``search`` reads only what a
proposal needs (never storage, the engine or the simulator), and nothing outside ``sim``
imports the simulator's modules: the simulator is an engine that runs as its own process
(``python -m tuner.sim``) and answers the same subprocess question as vLLM. Imports inside
``if TYPE_CHECKING:`` do not count (annotations only).
"""

from __future__ import annotations

import ast
from pathlib import Path

import optuna
import pytest

ROOT = Path(__file__).resolve().parents[2] / "tuner"

RANK = {
    "__init__": 0, "errors": 0, "optuna_adapter": 0, "settings": 0, "limits": 0,
    "numerics": 0, "slo": 0, "clock": 0,
    "home": 1, "trials": 1, "loadgen": 1, "modelfolder": 1, "installed": 1,
    "spec": 2, "space": 2, "sim": 2, "capacity": 2,
    "storage": 3, "engine": 3,
    "search": 4, "accuracy": 4,
    "runner": 5, "results": 5,
    "service": 6,
    "testing": 7, "cli": 8, "__main__": 9,
}

# What ``search`` never imports although its rank would allow it.
SEARCH_NEVER = {"storage", "engine", "sim", "runner"}
# Who imports the simulator's package (its public names; never its modules): `tuner sim`'s
# commands, and test fixtures that drive it.
SIM_USERS = {"cli", "testing"}

def layer_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return parts[0]


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imported_layers(tree: ast.AST) -> set[str]:
    """The tuner layers a module's code imports (not under ``if TYPE_CHECKING:``)."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking(node):
            return
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names
                       if a.name.startswith("tuner.") )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mod = node.module.split(".")
            if mod[0] == "tuner" and len(mod) > 1:
                out.add(mod[1])
            elif mod == ["tuner"]:
                out.update(a.name if a.name in RANK else "__init__" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def edges() -> set[tuple[str, str, str]]:
    """(importing layer, imported layer, file) for every import across layers."""
    out = set()
    for path in ROOT.rglob("*.py"):
        src = layer_of(path)
        for dst in imported_layers(ast.parse(path.read_text())):
            if dst != src:
                out.add((src, dst, str(path.relative_to(ROOT.parent))))
    return out


def violations(found: set[tuple[str, str, str]]) -> list[str]:
    return sorted(f"{f}: {src} -> {dst}" for src, dst, f in found
                  if not RANK[dst] < RANK[src] or (src == "search" and dst in SEARCH_NEVER)
                  or (dst == "sim" and src not in SIM_USERS))


def test_every_layer_has_a_rank():
    layers = {layer_of(p) for p in ROOT.rglob("*.py")}
    assert layers <= set(RANK), layers - set(RANK)


def test_imports_run_one_way():
    assert violations(edges()) == []


def sim_modules_imported(tree: ast.AST) -> set[str]:
    """The simulator's modules (not its package) that a module's code imports."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {n for n in names if n.startswith("tuner.sim.")}


def test_nothing_outside_the_simulator_imports_its_modules():
    found = {f"{p.relative_to(ROOT.parent)}: {m}" for p in ROOT.rglob("*.py")
             if layer_of(p) != "sim" for m in sim_modules_imported(ast.parse(p.read_text()))}
    assert found == set()


def test_a_simulator_module_import_is_found():
    assert sim_modules_imported(ast.parse("from tuner.sim.serveargs import help_answer")) == {
        "tuner.sim.serveargs"}
    assert sim_modules_imported(ast.parse("from tuner.sim import help_answer")) == set()


@pytest.mark.parametrize("src,dst", [("runner", "results"), ("trials", "runner"),
                                     ("search", "runner"), ("storage", "search"),
                                     ("space", "storage"), ("results", "service"),
                                     ("search", "storage"), ("search", "engine"),
                                     ("search", "sim"), ("storage", "engine"),
                                     ("engine", "storage"), ("storage", "sim"),
                                     ("trials", "space")])
def test_an_import_the_wrong_way_is_found(src, dst, tmp_path):
    code = ast.parse(f"from tuner.{dst} import something\n")
    found = {(src, d, f"tuner/{src}/new.py") for d in imported_layers(code)}
    assert violations(found) == [f"tuner/{src}/new.py: {src} -> {dst}"]


def test_annotations_only_imports_do_not_count():
    code = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from tuner.spec.study import StudySpec\n")
    assert imported_layers(code) == set()


# Optuna's private state --------------------------------------------------------------

ADAPTER = ROOT / "optuna_adapter.py"
# Private names that are ours (or another library's), not Optuna's: where and why.
OWN_PRIVATE: dict[tuple[str, str], str] = {}


def optuna_private_names() -> set[str]:
    """The private attributes of the Optuna objects tuner touches (a study, a trial, a
    frozen trial, a study summary, samplers and a storage), read off live objects."""
    study = optuna.create_study(directions=["maximize", "minimize"],
                                storage=optuna.storages.InMemoryStorage())
    trial = study.ask({"x": optuna.distributions.IntDistribution(0, 1)})
    study.tell(trial, [1.0, 1.0])
    objects = [study, trial, study.trials[0], optuna.get_all_study_summaries(
        study._storage)[0], optuna.samplers.TPESampler(), optuna.samplers.RandomSampler(),
        study._storage]
    return {n for o in objects for n in (*vars(o), *dir(type(o)))
            if n.startswith("_") and not n.startswith("__")}


def private_uses(tree: ast.AST, names: set[str]) -> set[str]:
    """Private Optuna attributes read on anything but ``self``/``cls``, and imports of
    private Optuna (or optuna-dashboard) modules."""
    out = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in names
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            out.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] \
                in ("optuna", "optuna_dashboard"):
            mods = node.module.split(".") + [a.name for a in node.names]
            out.update(m for m in mods if m.startswith("_"))
    return out


def test_optuna_private_state_is_reached_from_the_adapter_only():
    names = optuna_private_names()
    assert {"_storage", "_trial_id", "_study_id"} <= names
    found = []
    for path in ROOT.rglob("*.py"):
        if path == ADAPTER:
            continue
        rel = str(path.relative_to(ROOT.parent))
        for name in private_uses(ast.parse(path.read_text()), names):
            if (rel, name) not in OWN_PRIVATE:
                found.append(f"{rel}: {name}")
    assert sorted(found) == []


def test_a_private_optuna_call_outside_the_adapter_is_found():
    code = ast.parse("def f(study):\n    return study._storage.get_trial(1)\n"
                     "from optuna_dashboard import _note\n")
    assert private_uses(code, optuna_private_names()) == {"_storage", "_note"}
