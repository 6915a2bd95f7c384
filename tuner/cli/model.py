"""`tuner model make DIR [--shape tiny|8b|70b | --config PATH] [--set KEY=VALUE ...]`: a
weight-less model folder for vLLM's ``--load-format dummy`` (config and tokenizer, written
by tuner.modelfolder) of a model the simulator models: ``tuner.sim.shape_from_config``
refuses any other before a file is written."""

from __future__ import annotations

import argparse
import difflib
import json
import logging
from pathlib import Path
from typing import Any

from tuner.errors import UsageError
from tuner.modelfolder import SHAPES, get_shape, llama_config, write_model_folder
from tuner.sim import MODELLED, shape_from_config

log = logging.getLogger(__name__)

# Keys --set may add to a config that lacks them: Mistral's and Qwen2's own.
SETTABLE = ("head_dim", "sliding_window", "use_sliding_window")


def register(subparsers) -> None:
    p = subparsers.add_parser("model", help="write model folders for --load-format dummy")
    sub = p.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    m = sub.add_parser("make", help="write a model's config and a tokenizer (no weights) "
                                    "into DIR")
    m.add_argument("dir", help="the folder to write (created if needed; files overwritten)")
    base = m.add_mutually_exclusive_group()
    base.add_argument("--shape", choices=sorted(SHAPES),
                      help="tiny: 2 layers, hidden 128, vocab 1024 (the CPU tests); 8b / 70b: "
                           "Meta-Llama-3 dimensions, vocab 128256 (default tiny)")
    base.add_argument("--config", metavar="PATH",
                      help="a Hugging Face config.json, or a folder holding one, of a "
                           f"{', '.join(MODELLED)}: the folder keeps it (a tokenizer of "
                           "its vocabulary, its token ids)")
    m.add_argument("--set", metavar="KEY=VALUE", action="append", default=[],
                   help="a config.json key over --shape's or --config's, e.g. --set "
                        "num_hidden_layers=28 (VALUE read as JSON, else as text); "
                        "architectures=Qwen2ForCausalLM also sets model_type")
    m.set_defaults(func=_make)


def read_config(path: str) -> dict[str, Any]:
    """The JSON object in ``path`` (a config.json, or a folder holding one); UsageError."""
    file = Path(path)
    if file.is_dir():
        file = file / "config.json"
    try:
        config = json.loads(file.read_text())
    except FileNotFoundError:
        raise UsageError(f"--config {path}: no such file {file}; pass a config.json or a "
                         "folder holding one") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"--config {path}: {file} is not readable JSON: "
                         f"{str(e).splitlines()[0]}") from None
    if not isinstance(config, dict):
        raise UsageError(f"--config {path}: {file} holds no JSON object")
    return config


def with_overrides(config: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """``config`` with each ``KEY=VALUE`` of ``sets`` (VALUE as JSON, else as text).
    KEY must be one of the config's or of :data:`SETTABLE`; a text ``architectures``
    becomes a list of one and sets ``model_type``. UsageError naming the bad one."""
    out = dict(config)
    for item in sets:
        key, eq, text = item.partition("=")
        if not eq or not key:
            raise UsageError(f"--set {item!r}: write KEY=VALUE, e.g. --set hidden_size=3584")
        if key not in out and key not in SETTABLE:
            near = difflib.get_close_matches(key, [*out, *SETTABLE], n=1)
            hint = f"did you mean {near[0]!r}?" if near else "see the config's own keys"
            raise UsageError(f"--set {item!r}: config.json has no key {key!r}; {hint}")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        if key == "architectures" and isinstance(value, str):
            value = [value]
            out["model_type"] = MODELLED.get(value[0], out.get("model_type"))
        out[key] = value
    return out


def _make(args: argparse.Namespace) -> int:
    base = read_config(args.config) if args.config else llama_config(get_shape(args.shape or "tiny"))
    config = with_overrides(base, args.set)
    try:  # a model the simulator does not cover stops here
        shape = shape_from_config(config)
    except UsageError as e:
        raise UsageError(f"{args.config or 'tuner model make'}: {e}") from None
    try:
        path = write_model_folder(args.dir, config)
    except OSError as e:
        raise UsageError(f"cannot write {args.dir}: {e.strerror or e}; pick a writable folder") from e
    log.info("wrote %s (%s: %d layers, hidden %d, vocab %d); serve it with --model %s "
             "--load-format dummy", path, config["architectures"][0], shape.num_hidden_layers,
             shape.hidden_size, shape.vocab_size, path)
    print(path)
    return 0
