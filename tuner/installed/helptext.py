"""Parse what ``vllm serve --help=all`` prints (argparse's help) into ``EngineFlag``s. Pure.

The answer a probe prints is a few marker lines, then the help:

    tuner-probe: engine vllm 0.32.0+cpu
    tuner-probe: batch 2048 128 cpu             (optional: EngineArgs.get_batch_defaults)
    usage: vllm serve [model_tag] [options]
    ...
    SchedulerConfig:
      Scheduler configuration.

      --async-scheduling, --no-async-scheduling
                            If set to False, disable async scheduling. ... (default: None)
      --scheduling-policy {fcfs,priority}
                            The scheduling policy to use: ... (default: fcfs)

An option's entry starts with two spaces and a dash; its text runs to the next entry or
section heading, and ends with ``(default: X)`` (argparse's defaults formatter, which vLLM
uses). vLLM's log lines (``INFO 12-01 11:00:58 [...]``) may be mixed into the output: they
are skipped.
"""

from __future__ import annotations

import re
from typing import Any

from tuner.installed.answer import EngineFlag, Installed

MARKER = "tuner-probe: "
_LOG_LINE = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d ")
_ENTRY = re.compile(r"^  (-\S.*?)(?:\s{2,}(.*))?$")
_HEADING = re.compile(r"^\S.*:$")
_DEFAULT = re.compile(r"\(default:\s*(.*)\)\s*$", re.S)


class HelpParseError(ValueError):
    """The text is not an engine's ``--help=all`` answer."""


def _split_invocations(head: str) -> list[str]:
    """``--a A, -x A`` -> [``--a A``, ``-x A``] (commas inside ``{...}`` stay)."""
    parts, depth, cur = [], 0, ""
    for ch in head:
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return [p for p in parts if p]


def parse_value(text: str) -> Any:
    """A printed default as a Python value: None, bools, ints, floats, else the text."""
    t = text.strip()
    if t in ("None", ""):
        return None
    if t in ("True", "False"):
        return t == "True"
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return t


def _flag(head: str, text: str, group: str) -> EngineFlag | None:
    invocations = _split_invocations(head)
    words = [inv.split(" ", 1) for inv in invocations]
    longs = [w[0] for w in words if w[0].startswith("--") and not w[0].startswith("--no-")]
    if not longs:
        return None
    spelling = longs[0]
    metavar = next((w[1] for w in words if w[0] == spelling and len(w) > 1), "")
    negatable = any(w[0] == "--no-" + spelling[2:] for w in words)
    choices: tuple[str, ...] = ()
    if metavar.startswith("{"):
        kind = "choice"
        choices = tuple(c for c in metavar[1:metavar.index("}")].split(",") if c)
    elif not metavar:
        kind = "bool"
    elif "..." in metavar:
        kind = "list"
    else:
        kind = "value"
    m = _DEFAULT.search(" ".join(text.split()))
    default_text = m.group(1).strip() if m else ""
    aliases = tuple(w[0] for w in words if w[0] != spelling and w[0] != "--no-" + spelling[2:])
    return EngineFlag(spelling[2:].replace("-", "_"), spelling, kind, aliases, choices,
                      negatable, parse_value(default_text), default_text, group)


def parse_help(text: str) -> dict[str, EngineFlag]:
    """Every option of an argparse help text, by engine-argument name."""
    lines = [ln for ln in text.splitlines() if not _LOG_LINE.match(ln)]
    start = next((i for i, ln in enumerate(lines) if ln.startswith("usage:")), None)
    if start is None:
        raise HelpParseError("no 'usage:' line: not an argparse --help answer")
    flags: dict[str, EngineFlag] = {}
    group, head, body = "", None, []

    def close() -> None:
        if head is not None:
            f = _flag(head, "\n".join(body), group)
            if f is not None and f.name not in flags:
                flags[f.name] = f

    for ln in lines[start + 1:]:
        entry = _ENTRY.match(ln)
        if entry:
            close()
            head, body = entry.group(1).strip(), [entry.group(2) or ""]
        elif _HEADING.match(ln):
            close()
            group, head, body = ln[:-1], None, []
        elif head is not None:
            body.append(ln)
    close()
    return flags


def parse_answer(text: str) -> Installed:
    """A probe's whole output: marker lines (engine, version, batch defaults), then the help."""
    engine = version = device = ""
    batch = None
    for ln in text.splitlines():
        if not ln.startswith(MARKER):
            continue
        key, _, rest = ln[len(MARKER):].partition(" ")
        if key == "engine":
            engine, _, version = rest.strip().partition(" ")
        elif key == "batch":
            tokens, seqs, *where = rest.split(" ")
            try:
                batch, device = (int(tokens), int(seqs)), " ".join(where)
            except ValueError:
                pass
    if not engine or not version:
        raise HelpParseError(f"no '{MARKER}engine NAME VERSION' line in the answer")
    return Installed(engine, version.strip(), parse_help(text), batch, device)
