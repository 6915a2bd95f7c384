"""`tuner model make DIR --shape tiny|8b|70b`: a weight-less model folder for vLLM's
``--load-format dummy`` (config and tokenizer, written by tuner.modelfolder)."""

from __future__ import annotations

import argparse
import logging

from tuner.errors import UsageError
from tuner.modelfolder import SHAPES, write_model_folder

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    p = subparsers.add_parser("model", help="write model folders for --load-format dummy")
    sub = p.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    m = sub.add_parser("make", help="write a Llama config and tokenizer (no weights) into DIR")
    m.add_argument("dir", help="the folder to write (created if needed; files overwritten)")
    m.add_argument("--shape", default="tiny", choices=sorted(SHAPES),
                   help="tiny: 2 layers, hidden 128, vocab 1024 (the CPU tests); 8b / 70b: "
                        "Meta-Llama-3 dimensions, vocab 128256 (default tiny)")
    m.set_defaults(func=_make)


def _make(args: argparse.Namespace) -> int:
    try:
        path = write_model_folder(args.dir, args.shape)
    except OSError as e:
        raise UsageError(f"cannot write {args.dir}: {e.strerror or e}; pick a writable folder") from e
    shape = SHAPES[args.shape]
    log.info("wrote %s (%s: %d layers, hidden %d, vocab %d); serve it with --model %s "
             "--load-format dummy", path, args.shape, shape.num_hidden_layers,
             shape.hidden_size, shape.vocab_size, path)
    print(path)
    return 0
