"""The default sampler's package keeps the shape issue 43 gave it: no module over
``MAX_LINES`` lines, no class with more than ``MAX_METHODS`` methods, and no mutable class
state (every dataclass frozen, a class body holds only immutable values, and nothing
assigns to a class's attributes after it is made). Its imports (never the simulator, the
runner or storage) are checked with every other layer's in ``test_imports.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.unit.test_imports import SEARCH_NEVER, imported_layers

FRONT = Path(__file__).resolve().parents[2] / "tuner" / "search" / "front"
MAX_LINES = 300
MAX_METHODS = 10
# calls whose result cannot change: a value of these is immutable class state
IMMUTABLE_CALLS = {"tuple", "frozenset", "float", "int", "str", "bool", "field",
                   "ProcessSettings", "MappingProxyType"}


def _modules() -> list[Path]:
    return sorted(FRONT.glob("*.py"))


def _classes(tree: ast.AST) -> list[ast.ClassDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def methods(cls: ast.ClassDef) -> list[str]:
    """The functions defined in a class's body (properties and class methods count)."""
    return [n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _immutable(value: ast.expr | None) -> bool:
    if value is None or isinstance(value, ast.Constant):
        return True
    if isinstance(value, (ast.Tuple, ast.UnaryOp, ast.BinOp)):
        return all(_immutable(c) for c in ast.iter_child_nodes(value)
                   if isinstance(c, ast.expr))
    if isinstance(value, ast.Call):
        name = ast.unparse(value.func).split(".")[-1]
        return name in IMMUTABLE_CALLS
    return isinstance(value, (ast.Name, ast.Attribute))  # a named constant


def _frozen(decorator: ast.expr) -> bool:
    return (isinstance(decorator, ast.Call)
            and any(k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value
                    for k in decorator.keywords))


def class_state(tree: ast.AST) -> list[str]:
    """Mutable class state in a module: a dataclass not frozen, a class attribute whose
    value can change (a list, a dict, a set, a call that makes one), an assignment to an
    attribute of ``cls``, ``type(...)`` or a class of the module."""
    found = []
    classes = _classes(tree)
    names = {c.name for c in classes}
    for cls in classes:
        for d in cls.decorator_list:
            if "dataclass" in ast.unparse(d) and not _frozen(d):
                found.append(f"{cls.name}: a dataclass not frozen")
        for node in cls.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and not _immutable(node.value):
                found.append(f"{cls.name}: {ast.unparse(node)}")
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                   else [])
        for t in targets:
            if isinstance(t, ast.Attribute):
                owner = ast.unparse(t.value)
                if owner == "cls" or owner.startswith("type(") or owner in names:
                    found.append(f"line {t.lineno}: {ast.unparse(t)} assigned")
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_module_is_over_the_line_limit(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_class_has_more_than_the_method_limit(path):
    big = {c.name: len(methods(c)) for c in _classes(ast.parse(path.read_text()))
           if len(methods(c)) > MAX_METHODS}
    assert big == {}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_class_state_can_change(path):
    assert class_state(ast.parse(path.read_text())) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_no_module_imports_the_simulator_the_runner_or_storage(path):
    assert imported_layers(ast.parse(path.read_text())) & SEARCH_NEVER == set()


def test_the_checks_find_what_they_look_for():
    """The shape a class had before issue 43 (a class attribute overwritten, a mutable
    default, a dataclass not frozen, too many methods) is found."""
    code = ast.parse(
        "from dataclasses import dataclass\n"
        "from tuner.storage import open_study\n"
        "@dataclass\nclass A:\n    x: int = 0\n"
        "class View:\n    powers = (0.0,)\n    seen = []\n"
        + "".join(f"    def m{i}(self):\n        pass\n" for i in range(MAX_METHODS + 1))
        + "    def model(self):\n        View.powers = (1.0,)\n"
        "    @classmethod\n    def c(cls):\n        cls.seen = {}\n")
    assert class_state(code) == ["A: a dataclass not frozen", "View: seen = []",
                                 "line 32: View.powers assigned", "line 35: cls.seen assigned"]
    (view,) = [c for c in _classes(code) if c.name == "View"]
    assert len(methods(view)) > MAX_METHODS
    assert imported_layers(code) & SEARCH_NEVER == {"storage"}
