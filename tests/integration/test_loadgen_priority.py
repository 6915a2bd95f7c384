"""The client's CPU priority (``client_priority``, ``tuner.loadgen.priority``): real
scheduling calls on this machine's kernel, real HTTP on loopback against the fake server.

Where the OS grants real-time scheduling (root, or CAP_SYS_NICE), the client's thread runs
on SCHED_FIFO for the run and only for it, and nothing it starts inherits it; without the
capability (``setpriv`` drops it) the run goes on at normal priority and says it was
refused."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys

import pytest

from tuner.loadgen import LoadSpec, WorkloadSpec, dispatch, run_benchmark
from tuner.loadgen.priority import NORMAL, REALTIME, realtime
from tuner.testing.fake_server import FakeScript, FakeServer
from tuner.testing.scheduling import realtime_granted

pytestmark = pytest.mark.integration

SMALL = WorkloadSpec(input_len=32, output_len=8, vocab_size=1000)
POLICY = "import os; print(os.sched_getscheduler(0) & 0xff)"  # without the reset-on-fork bit


@pytest.fixture(scope="module")
def server():
    with FakeServer(FakeScript(ttft_ms=10, itl_ms=(2,))) as s:
        yield s


def test_the_client_runs_real_time_for_the_run_only_and_its_children_do_not(server):
    seen: list[tuple[int, str]] = []

    def on_done(_out) -> None:  # runs on the client's thread, inside the run
        if not seen:
            child = subprocess.run([sys.executable, "-c", POLICY], capture_output=True,
                                   text=True).stdout.strip()
            seen.append((os.sched_getscheduler(0) & 0xFF, child))

    plan = dispatch.ShardPlan(server.url, "fake-model", SMALL, concurrency=2, num_requests=6,
                              priority=REALTIME)
    result = asyncio.run(dispatch.run_shard(plan, on_done=on_done))
    assert [o.success for o in result.outputs] == [True] * 6
    after = os.sched_getscheduler(0)
    assert after == os.SCHED_OTHER  # the thread is back as it was
    if realtime_granted():
        assert result.granted.priority == REALTIME and not result.granted.refused
        assert seen[0] == (os.SCHED_FIFO, str(os.SCHED_OTHER))
    else:
        assert result.granted.priority == NORMAL and "refused" in result.granted.refused
        assert seen[0][0] == os.SCHED_OTHER


def test_normal_priority_asks_for_nothing():
    with realtime(False) as granted:
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
    assert granted.priority == NORMAL and not granted.refused


def test_every_client_process_takes_it_and_the_run_counts_them(server):
    load = LoadSpec(max_concurrency=4, num_requests=24, client_processes=2, warmup_requests=0,
                    max_client_lag_ms=1000.0, min_gap_share=0.0, client_priority="realtime")
    r = asyncio.run(run_benchmark(server.url, "fake-model", SMALL, load))
    assert r.metrics["completed"] == 24 and r.client["processes"] == 2
    if realtime_granted():
        assert r.client["realtime_processes"] == 2 and r.client["realtime_refused"] == 0
    else:
        assert r.client["realtime_processes"] == 0 and r.client["realtime_refused"] == 2


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="util-linux's setpriv is missing")
def test_without_the_capability_the_run_goes_on_at_normal_priority_and_says_so(server,
                                                                                tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run(
        ["setpriv", "--inh-caps=-all", "--bounding-set=-all", sys.executable, "-m", "tuner",
         "bench", "--url", server.url, "--num-requests", "12", "--input-len", "16",
         "--output-len", "4", "--vocab-size", "1000", "--max-concurrency", "2",
         "--max-client-lag-ms", "1000", "--min-gap-share", "0", "--client-priority",
         "realtime", "--json", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    client = json.loads(out.read_text())["client"]
    assert client["realtime_processes"] == 0 and client["realtime_refused"] == 1
    assert "real-time scheduling refused" in p.stderr
    assert "Real-time client processes:" in p.stdout and "0 (1 refused)" in p.stdout
