"""Pre-imported starts with a stand-in engine: a fake server module on PYTHONPATH that
reads a setting at import and serves /health (``tuner.testing.stand_in``). Real processes,
a real supervisor, real HTTP on loopback."""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

import pytest

from tuner.engine import proctree
from tuner.engine.command import Launch
from tuner.engine.forkclient import ForkedProcess, env_refusal, module_launch
from tuner.engine.ports import free_port
from tuner.engine.preimport import Preimported
from tuner.engine.supervisor import Server, plain_start
from tuner.errors import EngineExitedError

pytestmark = pytest.mark.integration

FAKE = '''
import os, sys
AT_IMPORT = os.environ.get("FAKE_AT_IMPORT", "unset")
LOCALE = os.environ.get("LC_CTYPE")
os.environ["FAKE_SET_BY_IMPORT"] = "1"
if __name__ == "__main__":
    print(f"fake: at_import={AT_IMPORT} lc_ctype={os.environ.get('LC_CTYPE')} "
          f"mark={os.environ.get('TRIAL_MARK')} "
          f"set_by_import={os.environ.get('FAKE_SET_BY_IMPORT')} "
          f"sid={os.getsid(0) == os.getpid()} argv={sys.argv[1:]}", flush=True)
    from tuner.testing.stand_in import main
    sys.exit(main(sys.argv[1:]))
'''


@pytest.fixture
def fake_engine(tmp_path) -> Path:
    package = tmp_path / "site" / "fakevllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "serve.py").write_text(FAKE)
    return tmp_path / "site"


def _server(site: Path, log: Path, starter, behave="healthy", **env) -> Server:
    port = free_port()
    argv = (sys.executable, "-m", "fakevllm.serve", "--behave", behave, "--port", str(port),
            "--child")
    return Server(Launch(argv, {"PYTHONPATH": str(site), **env}), port, log, starter=starter)


def test_one_supervisor_forks_each_trial_with_its_own_env_group_and_log(fake_engine, tmp_path):
    starter = Preimported(tmp_path / "slot")
    try:
        for i in range(2):
            server = _server(fake_engine, tmp_path / f"t{i}.log", starter,
                             TRIAL_MARK=f"trial-{i}", FAKE_AT_IMPORT="x")
            with server:
                assert isinstance(server.proc, ForkedProcess)
                server.wait_healthy(30)
                assert server.pgid != starter.server.proc.pid
                assert len(proctree.in_group(server.pgid)) == 2  # it and its child
            assert proctree.in_group(server.pgid) == []
            assert server.returncode() == -15  # SIGTERM, as reported by the supervisor
            log = server.log()
            assert f"at_import=x lc_ctype={os.environ.get('LC_CTYPE')} mark=trial-{i} " \
                   "set_by_import=1 sid=True" in log
            assert "--behave', 'healthy'" in log
        assert starter.server.ready["env_read"]["FAKE_AT_IMPORT"] == "x"
        assert starter.server.ready["env_written"] == {"FAKE_SET_BY_IMPORT": "1"}
    finally:
        starter.close()


def test_a_forked_server_that_exits_reports_its_code(fake_engine, tmp_path):
    starter = Preimported(tmp_path / "slot")
    try:
        with _server(fake_engine, tmp_path / "t.log", starter, "exit") as server:
            with pytest.raises(EngineExitedError) as e:
                server.wait_healthy(30)
        assert e.value.returncode == 1 and "refused by the stand-in" in server.log()
    finally:
        starter.close()


def test_an_env_read_at_import_that_differs_falls_back_to_a_plain_start(
        fake_engine, tmp_path, caplog):
    starter = Preimported(tmp_path / "slot")
    try:
        with _server(fake_engine, tmp_path / "a.log", starter, FAKE_AT_IMPORT="a") as first:
            assert isinstance(first.proc, ForkedProcess)
        with caplog.at_level(logging.WARNING, "tuner.engine.preimport"):
            with _server(fake_engine, tmp_path / "b.log", starter, FAKE_AT_IMPORT="b") as other:
                assert not isinstance(other.proc, ForkedProcess)
                other.wait_healthy(30)
        assert "at_import=b" in other.log()
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
            "preimported start refused, starting plainly: the environment differs in "
            "FAKE_AT_IMPORT, read at import"]
    finally:
        starter.close()


def test_a_dead_supervisor_is_started_again(fake_engine, tmp_path):
    starter = Preimported(tmp_path / "slot")
    try:
        with _server(fake_engine, tmp_path / "a.log", starter) as first:
            first.wait_healthy(30)
            dead = starter.server.proc.pid
            starter.server.proc.kill()
            starter.server.proc.wait()
            # its child got SIGTERM (PDEATHSIG) and its code is lost with the supervisor
            assert first.proc.wait(10) is not None
        with _server(fake_engine, tmp_path / "b.log", starter) as second:
            assert isinstance(second.proc, ForkedProcess)
            second.wait_healthy(30)
        assert starter.server.proc.pid != dead
    finally:
        starter.close()


def test_a_supervisor_that_cannot_start_falls_back(fake_engine, tmp_path, caplog):
    starter = Preimported(tmp_path / "slot")
    port = free_port()
    argv = (sys.executable, "-m", "fakevllm.missing", "--port", str(port))
    with caplog.at_level(logging.WARNING, "tuner.engine.preimport"):
        server = Server(Launch(argv, {"PYTHONPATH": str(fake_engine)}), port,
                        tmp_path / "t.log", starter=starter)
        with server:
            assert not isinstance(server.proc, ForkedProcess)
    assert "importing fakevllm.missing failed" in caplog.text


def test_the_supervisor_leaves_with_its_worker_socket(fake_engine, tmp_path):
    starter = Preimported(tmp_path / "slot")
    with _server(fake_engine, tmp_path / "a.log", starter):
        supervisor = starter.server.proc
    starter.close()
    assert supervisor.returncode == 0 and not proctree.alive(supervisor.pid)


@pytest.mark.parametrize("argv, found", [
    (("/py", "-m", "vllm.entrypoints.openai.api_server", "--port", "1"),
     ("/py", "vllm.entrypoints.openai.api_server")),
    (("vllm", "serve", "m"), None), (("/py",), None)])
def test_only_a_python_module_launch_can_be_forked(argv, found):
    assert module_launch(argv) == found


def test_env_refusal_names_what_the_import_read_or_a_library_loads():
    ready = {"env_read": {"VLLM_BATCH_INVARIANT": None, "VLLM_CONFIG_ROOT": "/c"}}
    base = {"VLLM_CONFIG_ROOT": "/c", "OMP_NUM_THREADS": "4", "CUDA_VISIBLE_DEVICES": "0"}
    assert env_refusal(ready, base, {**base, "CUDA_VISIBLE_DEVICES": "1"}) is None
    assert env_refusal(ready, base, {**base, "VLLM_BATCH_INVARIANT": "1"}) == (
        "the environment differs in VLLM_BATCH_INVARIANT, read at import")
    assert env_refusal(ready, base, {**base, "OMP_NUM_THREADS": "8"}) == (
        "the environment differs in OMP_NUM_THREADS, read at import")
    assert "VLLM_CONFIG_ROOT" in env_refusal(ready, base, {"OMP_NUM_THREADS": "4"})


def test_a_trial_in_the_c_locale_is_forked_with_the_locale_python_itself_sets(
        fake_engine, tmp_path):
    """PEP 538: an interpreter started in the C locale puts LC_CTYPE into its own
    environment. The supervisor's import read that value; a trial whose environment would
    be coerced the same way is forked, holding LC_CTYPE as a fresh interpreter does."""
    env = {"PYTHONPATH": str(fake_engine), "PATH": os.environ["PATH"], "LANG": "C"}
    argv = [sys.executable, "-m", "fakevllm.serve", "--behave", "exit", "--port", "1"]
    assert plain_start(argv, env, tmp_path / "plain.log").wait(30) == 1
    coerced = re.search(r"lc_ctype=(\S+)", (tmp_path / "plain.log").read_text()).group(1)
    assert coerced != "None"  # this interpreter coerces the C locale
    starter = Preimported(tmp_path / "slot")
    try:
        forked = starter(argv, env, tmp_path / "forked.log")
        assert isinstance(forked, ForkedProcess)
        assert forked.wait(30) == 1
        assert starter.server.ready["env_read"]["LC_CTYPE"] == coerced
    finally:
        starter.close()
    assert f"lc_ctype={coerced} " in (tmp_path / "forked.log").read_text()
