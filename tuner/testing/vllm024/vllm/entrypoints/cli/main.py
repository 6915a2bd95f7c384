"""`vllm serve --help=all` of vLLM 0.24.0, from the recording beside the package."""

import sys
from pathlib import Path

RECORDING = Path(__file__).resolve().parents[3] / "serve-help-all.txt"


def main() -> int:
    if sys.argv[1:] != ["serve", "--help=all"]:
        print("stand-in vLLM 0.24.0 answers only `vllm serve --help=all`", file=sys.stderr)
        return 2
    sys.stdout.write(RECORDING.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
