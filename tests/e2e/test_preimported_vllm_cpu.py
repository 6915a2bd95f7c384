"""Pre-imported starts of the real vLLM CPU build: one supervisor imports vLLM once and
forks two servers in turn; each serves completions and leaves no process behind.

Start times are recorded as test properties (``start_s``), never asserted.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tuner.engine import proctree
from tuner.engine.command import PREIMPORTED_ENV
from tuner.engine.ports import free_port
from tuner.engine.forkclient import ForkedProcess
from tuner.engine.preimport import Preimported
from tuner.engine.supervisor import Server
from tuner.testing.vllm_cpu import vllm_cpu_launch

pytestmark = pytest.mark.e2e


def _complete(url: str, model: str) -> dict:
    body = {"model": model, "prompt": [95, 96, 97, 98], "max_tokens": 4, "ignore_eos": True}
    request = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def test_one_supervisor_forks_two_servers_that_serve_and_stop_cleanly(
        vllm_cpu_python, vllm_cpu_env, tiny_model_dir, tmp_path, record_property):
    starter = Preimported(tmp_path / "slot")
    # float32: on hosts with AMX, the CPU build's model worker dies of SIGILL at its first
    # bfloat16 step whenever vLLM forks it (VLLM_WORKER_MULTIPROC_METHOD=fork, as
    # PREIMPORTED_ENV sets; a plain start with it too), not in float32 (docs/starts.md)
    env = {**vllm_cpu_env, **PREIMPORTED_ENV}
    supervisors = set()
    try:
        for i in range(2):
            port = free_port()
            launch = vllm_cpu_launch(vllm_cpu_python, tiny_model_dir, port, env,
                                     ["--enforce-eager", "--max-model-len", "2048",
                                      "--dtype", "float32"])
            server = Server(launch, port, tmp_path / f"server-{i}.log", starter=starter)
            with server:
                assert isinstance(server.proc, ForkedProcess), server.log()[-2000:]
                record_property(f"start_s_{i}", round(server.wait_healthy(300), 1))
                supervisors.add(starter.server.proc.pid)
                # the server leads its own group, apart from the supervisor's
                assert server.pgid == server.proc.pid != starter.server.proc.pid
                assert proctree.in_group(server.pgid)
                try:
                    reply = _complete(server.url, str(tiny_model_dir))
                except urllib.error.HTTPError as e:
                    pytest.fail(f"server {i} answered {e.code}: {e.read()[:500]!r}; its log "
                                f"ends:\n{server.log()[-3000:]}")
                assert reply["usage"]["completion_tokens"] == 4
            assert proctree.in_group(server.pgid) == []
            assert server.returncode() is not None
        assert len(supervisors) == 1 and starter.server.alive()
        assert not starter.server.ready["cuda_initialized"]
    finally:
        starter.close()
