"""`python -m tuner.sim serve [vllm serve flags]`: the simulated server without the rest of
the tuner CLI (it starts, and refuses, faster)."""

import argparse
import sys

from tuner.errors import TunerError
from tuner.sim.serveargs import add_serve_flags, help_answer, refused, wants_help_all


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    gpu = wants_help_all(words)
    if gpu is not None and words[:1] == ["serve"]:
        try:
            sys.stdout.write(help_answer(gpu, "python -m tuner.sim serve"))
        except (KeyError, ValueError, TunerError) as e:  # an unknown GPU
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    parser = argparse.ArgumentParser(prog="python -m tuner.sim")
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_flags(sub.add_parser("serve", help="serve like `vllm serve` on a simulated GPU"))
    args = parser.parse_args(argv)
    if not (args.model or args.model_tag):
        parser.error("no model: pass --model DIR (a folder with a config.json)")
    refusal = refused(args)
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    from tuner.sim.launch import serve

    try:
        return serve(args)
    except TunerError as e:
        print(f"tuner: error: {e}", file=sys.stderr)
        return e.exit_code


sys.exit(main())
