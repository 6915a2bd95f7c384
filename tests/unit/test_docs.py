"""The front door stays true: every `tuner` command and flag the README names exists in the
real parser, every path it names exists, its layout block is the package's tree, the study
file page lists every key of the schema, and no docstring or comment under tuner/ carries a
round number (history lives in docs/decisions/)."""

from __future__ import annotations

import argparse
import ast
import io
import re
import shlex
import tokenize
from pathlib import Path

import pytest
from pydantic import BaseModel

from tuner.cli import COMMAND_MODULES, build_parser
from tuner.spec.study import StudySpec

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
ROUND = re.compile(r"round \d", re.IGNORECASE)


def _code_spans(text: str) -> list[str]:
    """The README's code: inline spans (which may wrap a line) and indented block lines."""
    spans = [s.replace("\n", " ") for s in re.findall(r"`([^`]+)`", text, re.S)]
    spans += [line[4:] for line in text.splitlines() if line.startswith("    ")]
    return spans


def _tuner_commands(text: str) -> list[list[str]]:
    """Each `tuner ...` command line as its words after `tuner`, up to a comment."""
    out = []
    for span in _code_spans(text):
        for m in re.finditer(r"(?:^|[\s$/])tuner((?: +[^\s#`]+)+)", span):
            try:
                words = shlex.split(m.group(1))
            except ValueError:
                words = m.group(1).split()
            out.append(words)
    return out


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _check_command(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """What in ``words`` the parser does not know (a command needs a known subcommand)."""
    problems, commanded = [], not _subcommands(parser)
    for word in words:
        if word.startswith("-") and len(word) > 1 and not word[1].isdigit():
            flag = word.split("=", 1)[0]
            known = {s for a in parser._actions for s in a.option_strings}
            if flag not in known:
                problems.append(f"{flag} (not an option of `{parser.prog}`)")
        elif word in _subcommands(parser):
            parser = _subcommands(parser)[word]
            commanded = not _subcommands(parser)
        elif not commanded:
            problems.append(f"{word} (not a command of `{parser.prog}`)")
            break
    return problems


def test_the_readme_names_tuner_commands():
    # the check below must see the README's commands, or it proves nothing
    commands = [w[0] for w in _tuner_commands(README) if w and not w[0].startswith("-")]
    assert {"study", "worker", "pareto", "best", "launch", "status", "stop"} <= set(commands)


def test_every_tuner_command_and_flag_in_the_readme_exists():
    parser = build_parser(modules=COMMAND_MODULES)
    problems = {" ".join(["tuner", *w]): p for w in _tuner_commands(README)
                if (p := _check_command(parser, w))}
    assert not problems


def test_the_check_catches_an_unknown_flag_and_command():
    parser = build_parser(modules=COMMAND_MODULES)
    assert _check_command(parser, ["best", "x", "--max-itl-p99", "5"]) == []
    assert _check_command(parser, ["best", "x", "--max-itl", "5"])
    assert _check_command(parser, ["tune", "x"])
    assert _check_command(parser, ["study", "make", "f.toml"])


def _named_paths(text: str) -> set[str]:
    """Repository paths the README names in code spans or links."""
    candidates = set(re.findall(r"\]\(([^)\s]+)\)", text))
    for span in _code_spans(text):
        # a command's output file (-o, --out) is not a repository path
        candidates.update(re.sub(r"(?:-o|--out) \S+", "", span).split())
    paths = set()
    for c in candidates:
        c = c.strip("`,;:()")
        # a folder (a trailing /), a file (an extension) or a glob; not words like tok/s
        if re.fullmatch(r"(?:[\w.-]+/)+|(?:[\w.-]+/)*[\w*-]*[A-Za-z*][\w*-]*\.[A-Za-z*]+", c) \
                and not c.startswith((".venv", ".tuner", "./", "/")) and "://" not in c:
            paths.add(c)
    return paths


def test_every_path_the_readme_names_exists():
    paths = _named_paths(README.split("## Layout", 1)[0] + README.partition("## Read on")[2])
    assert "studies/llama3-8b-h200.toml" in paths and "docs/studies.md" in paths
    missing = sorted(p for p in paths if not any(ROOT.glob(p.rstrip("/"))))
    assert not missing


def _layout_block(text: str) -> list[str]:
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return [line[4:] for line in section.splitlines() if line.startswith("    ")]


def test_the_layout_block_is_the_tree():
    block = _layout_block(README)
    assert block[0].strip() == "tuner/"
    listed = {m.group(1) for line in block[1:-1] if (m := re.match(r"\s+(\w+)/\s", line))}
    actual = {p.name for p in (ROOT / "tuner").iterdir()
              if p.is_dir() and p.name != "__pycache__"}
    assert listed == actual, (sorted(actual - listed), sorted(listed - actual))
    tops = []
    for word in block[-1].split():
        m = re.fullmatch(r"([\w/]+?)/?\{([\w,]+)\}/?", word)
        tops += [f"{m.group(1)}/{part}" for part in m.group(2).split(",")] if m else [word]
    assert tops and all((ROOT / t).is_dir() for t in tops), tops


def _study_keys() -> set[str]:
    keys = set()
    for name, field in StudySpec.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys.update(ann.model_fields)
        else:
            keys.add(name)
    return keys


def test_the_study_file_page_lists_every_key():
    page = (ROOT / "docs/studies.md").read_text()
    missing = sorted(k for k in _study_keys() if f"`{k}`" not in page)
    assert not missing


def _docs_and_comments(path: Path) -> list[tuple[int, str]]:
    source = path.read_text()
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((getattr(node, "lineno", 1), doc))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    return out


def test_no_docstring_or_comment_under_tuner_names_a_round():
    hits = [f"{p.relative_to(ROOT)}:{line}" for p in sorted((ROOT / "tuner").rglob("*.py"))
            for line, text in _docs_and_comments(p) if ROUND.search(text)]
    assert not hits


@pytest.mark.parametrize("text, found", [('"""As round 7 showed."""\n', True),
                                         ("x = 1  # Round 12: kept\n", True),
                                         ('"""Rounds the value."""\nx = "round 2"\n', False)])
def test_the_round_check_reads_docstrings_and_comments(tmp_path, text, found):
    path = tmp_path / "m.py"
    path.write_text(text)
    assert any(ROUND.search(t) for _, t in _docs_and_comments(path)) is found


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 160
