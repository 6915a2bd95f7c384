"""Server supervision with a real stand-in process: health, exit codes, timeouts, and a stop
that leaves no process of the group behind (checked by walking the process tree)."""

import os
import sys

import pytest

from tuner.errors import EngineExitedError, EngineTimeoutError
from tuner.engine import proctree
from tuner.engine.command import Launch
from tuner.engine.ports import free_port
from tuner.engine.supervisor import Server


def stand_in(tmp_path, *args):
    port = free_port()
    argv = (sys.executable, "-m", "tuner.testing.stand_in", "--port", str(port), *args)
    return Server(Launch(argv, {"CUDA_VISIBLE_DEVICES": "7"}), port, tmp_path / "s.log")


def test_healthy_server_stops_with_its_children(tmp_path):
    with stand_in(tmp_path, "--behave", "healthy", "--child") as server:
        assert server.wait_healthy(20) < 20
        pgid = server.pgid
        assert len(proctree.in_group(pgid)) == 2
    assert proctree.in_group(pgid) == []
    assert "KV cache size" in server.log()
    assert not [p for p in proctree.descendants(os.getpid())
                if "tuner.testing.stand_in" in proctree.cmdline(p)]


def test_exit_at_start_is_told_apart_with_its_code(tmp_path):
    with stand_in(tmp_path, "--behave", "exit", "--exit-code", "3") as server:
        with pytest.raises(EngineExitedError) as info:
            server.wait_healthy(20)
    assert info.value.returncode == 3
    assert "refused by the stand-in" in str(info.value)


def test_not_ready_in_time(tmp_path):
    with stand_in(tmp_path, "--behave", "hang", "--child") as server:
        with pytest.raises(EngineTimeoutError, match="not ready within 2 s"):
            server.wait_healthy(2)
        pgid = server.pgid
    assert proctree.in_group(pgid) == []


def test_sigterm_ignored_then_sigkill(tmp_path):
    server = stand_in(tmp_path, "--behave", "ignore-term")
    server.start()
    server.wait_healthy(20)
    took = server.stop(grace_s=1.0)
    assert took >= 1.0 and server.returncode() == -9
    assert proctree.in_group(server.pgid) == []


def test_environment_pins_the_gpus(tmp_path):
    with stand_in(tmp_path, "--behave", "healthy") as server:
        server.wait_healthy(20)
        environ = open(f"/proc/{server.proc.pid}/environ", "rb").read().split(b"\0")
        assert b"CUDA_VISIBLE_DEVICES=7" in environ
