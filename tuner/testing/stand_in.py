"""A tiny stand-in for `vllm serve`, for supervision tests: it behaves as told.

    python -m tuner.testing.stand_in --behave healthy|exit|hang|ignore-term [--port P]
        [--exit-code N] [--message TEXT] [--child]

``healthy`` serves /health (200) until stopped; ``exit`` prints the message (like vLLM's
start checks) and exits with the code; ``hang`` never becomes healthy; ``ignore-term``
serves /health but ignores SIGTERM (so only SIGKILL ends it). ``--child`` also starts a
sleeping child process in the same group, to prove the whole group is stopped.
"""

from __future__ import annotations

import argparse
import http.server
import signal
import subprocess
import sys
import time


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the stdlib's name
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--behave", default="healthy")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--exit-code", type=int, default=1)
    p.add_argument("--message", default="ValueError: refused by the stand-in")
    p.add_argument("--child", action="store_true")
    args, _ = p.parse_known_args(argv)
    print(f"stand-in pid starting: {args.behave}", flush=True)
    if args.child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    if args.behave == "exit":
        time.sleep(0.2)
        print(args.message, file=sys.stderr, flush=True)
        return args.exit_code
    if args.behave == "hang":
        while True:
            time.sleep(1)
    if args.behave == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("GPU KV cache size: 12,345 tokens", flush=True)
    http.server.ThreadingHTTPServer(("127.0.0.1", args.port), _Health).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
