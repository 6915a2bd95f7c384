"""Stored studies for tests: realistic trial records without running a server.

``make_study(storage_url, kind)`` creates a study from a study spec (``create_study``,
which enqueues the three baselines), asks and tells the baselines as a worker does, then
stores seeded random proposals, put through the rule set as the runner does, each in one
write (``study.add_trial``), all told with ``tuner.trials.record``'s outcomes. The metrics come from a small, plausible model of vLLM serving Llama-3-8B on an
H200 (random 1024 in / 128 out at concurrency 256): a larger token budget buys throughput
and costs inter-token latency, chunked prefill lowers it, eager mode costs speed, a high
memory share with many sequences runs out of memory. It is a fixture, not a simulator.

The ``mixed`` study also gets a few hand-picked configurations (as a converging sampler
would propose them) that beat the default baseline, so that it has a real front and gains.
While a fixture is written the database does not wait for the disk on each commit
(SQLite ``synchronous=OFF``, PostgreSQL ``synchronous_commit=off`` on the builder's own
connections): the stored rows are the same, only their durability differs.

Kinds:
    ``mixed``        baselines measured, then measured, infeasible, one duplicate and one
                     failed trial; the default baseline misses the ITL SLO
    ``empty``        created: the baselines are queued, nothing has run
    ``only-failed``  every trial crashed during its benchmark
    ``no-slo-met``   everything measured, no trial meets the study's SLOs

``dashboard_process`` runs `tuner dashboard` on such a storage as a real subprocess.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Mapping

import optuna
import sqlalchemy
from optuna.trial import TrialState
from sqlalchemy import event

from tuner import optuna_adapter
from tuner.accuracy import guard
from tuner.accuracy.figures import Figures
from tuner.runner.tell import tell
from tuner.space import SearchSpace, flags_argv, repair
from tuner.space.draw import draw_value
from tuner.storage import OpenStudy, create_study, open_study
from tuner.spec import StudySpec
from tuner.spec.study import ModelSection, SLOSection, SpaceSection, WorkloadSection
from tuner.trials import record
from tuner.trials.record import TrialRecord
from tuner.testing.popen import stopped

KINDS = ("mixed", "empty", "only-failed", "no-slo-met")
MODEL_PATH = "/models/llama3-8b"


def study_spec(name: str, p99_itl_ms: float = 150.0, p99_ttft_ms: float = 3000.0) -> StudySpec:
    """A Llama-3-8B on H200 study with two objectives and two SLOs; it opts in to the fp8
    KV cache (a lossy value, ``[space] lossy``) that its converging search proposes."""
    return StudySpec(
        name=name, description="fixture: Llama-3-8B on an H200, random 1024/128",
        model=ModelSection(path=MODEL_PATH, served_name="llama3-8b", dtype="bfloat16",
                           context_len=8192, num_attention_heads=32, vocab_size=128256),
        workload=WorkloadSection(input_len=1024, output_len=128, max_concurrency=256),
        slo=SLOSection(p99_itl_ms=p99_itl_ms, p99_ttft_ms=p99_ttft_ms),
        space=SpaceSection(lossy=["kv_cache_dtype"]))


def metrics_for(flags: Mapping[str, Any], rng: random.Random) -> dict[str, float]:
    """vLLM benchmark metrics (its names) for a configuration, with 2 % noise."""
    budget, seqs = flags["max_num_batched_tokens"], flags["max_num_seqs"]
    conc = min(256, seqs)
    noise = lambda: rng.gauss(1.0, 0.02)  # noqa: E731
    f_budget = min(1.3, max(0.6, 1 + 0.12 * math.log2(budget / 8192)))
    thr = (3860.0 * (conc / 256) ** 0.6 * f_budget * (0.85 if flags["enforce_eager"] else 1.0)
           * (1 + (flags["gpu_memory_utilization"] - 0.92) * 3.0)
           * (1.05 if flags["kv_cache_dtype"] == "fp8" else 1.0) * noise())
    itl = (25 * (conc / 256) ** 0.5 + budget / 8192 * 170
           * (1.0 if flags["enable_chunked_prefill"] else 1.4)) * (
        1.1 if flags["enforce_eager"] else 1.0) * noise()
    ttft = (200 + 256 * 1024 / budget * 8) * noise()
    out = {"output_throughput": thr, "request_throughput": thr / 128,
           "total_token_throughput": thr * 1152 / 128, "completed": 1000.0, "failed": 0.0}
    for name, p99, med in (("itl", itl, itl * 0.35), ("ttft", ttft, ttft * 0.4),
                           ("tpot", itl * 0.8, itl * 0.3), ("e2el", ttft + 128 * itl * 0.4,
                                                            ttft * 0.4 + 128 * itl * 0.3)):
        out.update({f"mean_{name}_ms": med * 1.1, f"median_{name}_ms": med,
                    f"p90_{name}_ms": (med + p99) / 2, f"p99_{name}_ms": p99})
    return out


def _command(spec: StudySpec, launch: Mapping[str, Any]) -> list[str]:
    return ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", spec.model.path,
            "--served-model-name", str(spec.model.served_name), "--port", "8000",
            *flags_argv(launch), "--load-format", "dummy"]


def _propose(space: SearchSpace, params: Mapping[str, Any]) -> tuple[TrialRecord, dict,
                                                                      str | None]:
    """(record, flags, infeasible reason) as the runner's proposal step makes them; the
    hand-picked ones (``OFF_GRID``) as a study made before the compile grid stored them."""
    if params.get(OFF_GRID):
        space = dataclasses.replace(space, grids={})
        params = {k: v for k, v in params.items() if k != OFF_GRID}
    fixed = repair(space, space.complete(params))
    asked = TrialRecord(flags=dict(fixed.flags), launch=dict(fixed.flags),
                        repaired=tuple(fixed.fixed_rules))
    return asked, dict(fixed.flags), fixed.infeasible


def _run_attrs(spec: StudySpec, attrs: TrialRecord, n: int) -> TrialRecord:
    return dataclasses.replace(
        attrs, command=tuple(_command(spec, attrs.launch)), engine="vllm", host="gpu-host-1",
        worker="gpu-host-1-0", vllm_version="0.24.0", gpu_name="NVIDIA H200",
        phases={"start": 52.0 + n % 5, "benchmark": 41.0})


def _told(kind: str, spec: StudySpec, attrs: TrialRecord, flags: dict, infeasible: str | None,
          i: int, rng: random.Random) -> TrialRecord:
    if infeasible:
        return record.infeasible(spec, {"class": "rules", "message": infeasible,
                                        "log_tail": ""}, attrs)
    attrs = _run_attrs(spec, attrs, i)
    if kind == "only-failed" or (kind == "mixed" and i == 10):
        return record.failed({"class": "crashed", "message": "engine exited with code -9 "
                              "during the benchmark", "log_tail": "Killed"}, attrs)
    if (flags["gpu_memory_utilization"] >= 0.93 and not flags["enforce_eager"]
            and flags["max_num_seqs"] > 512 and not attrs.baseline):
        return record.infeasible(spec, {"class": "oom", "message": "CUDA out of memory while "
                                        "capturing CUDA graphs", "log_tail": "OOM"}, attrs)
    kv = int(920_192 * flags["gpu_memory_utilization"] / 0.92)  # 920,192 at vLLM 0.24's 0.92
    return scripted_accuracy(spec, record.measured(
        spec, metrics_for(flags, rng), dataclasses.replace(attrs, kv_cache_tokens=kv)))


# The accuracy guard's figures for a lossy fixture trial (scripted, as if replayed against the
# default baseline, trial 0): above the default limit of 0.97.
SCRIPTED_FIGURES = Figures(token_agreement=0.984, logprob_diff=0.0125, prompts=32, diverged=3,
                           agreed_tokens=2016, tokens=2048)


def scripted_accuracy(spec: StudySpec, told: TrialRecord,
                      figures: Figures = SCRIPTED_FIGURES) -> TrialRecord:
    """A measured record with the guard's attribute: the reference role for the default
    baseline, ``figures`` for a trial with a lossy value (nothing for the others)."""
    role = guard.role(spec, told.flags, told.baseline)
    if role == guard.REFERENCE:
        return record.with_accuracy(spec, told, guard.reference_attrs(spec, 0))
    if role == guard.REPLAY:
        return record.with_accuracy(spec, told, guard.replay_attrs(spec, told.flags, figures, 0))
    return told


# Marks a hand-picked configuration: stored off the compile grid, as a study made before
# the grid (tuner/space/compile_grid.py) has them; such studies still load and show.
OFF_GRID = "__off_grid__"

# What a converging search proposes on this model: chunked prefill with a budget below the
# default, a high memory share, an fp8 KV cache. The first two beat the default baseline;
# the third runs out of memory (infeasible).
GOOD = (
    {"max_num_batched_tokens": 5120, "max_model_len": 2048, "gpu_memory_utilization": 0.95,
     "enable_prefix_caching": False, "enable_chunked_prefill": True, "enforce_eager": False,
     "max_num_seqs": 512, "block_size": 16, "kv_cache_dtype": "fp8"},
    {"max_num_batched_tokens": 3072, "max_model_len": 2048, "gpu_memory_utilization": 0.94,
     "enable_prefix_caching": False, "enable_chunked_prefill": True, "enforce_eager": False,
     "max_num_seqs": 384, "block_size": 16, "kv_cache_dtype": "fp8"},
    {"max_num_batched_tokens": 12288, "max_model_len": 4096, "gpu_memory_utilization": 0.95,
     "enable_prefix_caching": False, "enable_chunked_prefill": True, "enforce_eager": False,
     "max_num_seqs": 1024, "block_size": 16, "kv_cache_dtype": "fp8"},
)


@contextlib.contextmanager
def _fast_commits() -> Iterator[None]:
    """Connections opened inside do not wait for the disk on commit (fixture data only)."""
    def on_connect(dbapi_conn, _record) -> None:
        cur = dbapi_conn.cursor()
        if "sqlite" in type(dbapi_conn).__module__:
            cur.execute("PRAGMA synchronous=OFF")
        else:
            cur.execute("SET synchronous_commit TO OFF")
        cur.close()
        if "sqlite" not in type(dbapi_conn).__module__:
            dbapi_conn.commit()

    event.listen(sqlalchemy.engine.Engine, "connect", on_connect)
    try:
        yield
    finally:
        event.remove(sqlalchemy.engine.Engine, "connect", on_connect)


def make_study(storage_url: str, kind: str = "mixed", n: int = 12, seed: int = 0,
               name: str | None = None, in_progress: bool = False) -> OpenStudy:
    """Create and fill a study of ``kind`` (see the module docstring) with ``n`` told trials
    (the three baselines first); ``in_progress`` leaves one more trial running."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    with _fast_commits():
        opened = _build(storage_url, kind, n, seed, name, in_progress)
    return open_study(opened.spec.name, storage_url)


class _Teller:
    """Decides each trial's record: duplicates of measured flags, else ``_told``."""

    def __init__(self, kind: str, spec: StudySpec, seed: int) -> None:
        self.kind, self.spec, self.rng = kind, spec, random.Random(seed)
        self.measured: dict[str, TrialRecord] = {}

    def told(self, number: int, attrs: TrialRecord, flags: dict,
             infeasible: str | None) -> TrialRecord:
        key = record.flags_key(flags)
        if key in self.measured and self.kind != "only-failed":
            return record.duplicate(self.measured[key], attrs)
        told = _told(self.kind, self.spec, attrs, flags, infeasible, number, self.rng)
        if told.outcome == record.MEASURED:
            self.measured[key] = dataclasses.replace(told, number=number)
        return told


def _proposals(kind: str, space: SearchSpace, seed: int) -> Iterator[dict[str, Any]]:
    """Parameters after the baselines: the hand-picked ones (mixed), then random draws,
    with the first draw proposed again as the 9th trial (mixed: a duplicate)."""
    rng = random.Random(seed + 1)
    names = [p.name for p in space.params]
    if kind == "mixed":
        yield from ({k: g[k] for k in names} | {OFF_GRID: True} for g in GOOD)
    first = None
    for i in itertools.count(len(GOOD) if kind == "mixed" else 0):
        if kind == "mixed" and i == 5 and first is not None:
            yield first
        params = {p.name: draw_value(p, rng) for p in space.params}
        first = first or params
        yield params


def _build(storage_url: str, kind: str, n: int, seed: int, name: str | None,
           in_progress: bool) -> OpenStudy:
    spec = study_spec(name or f"fixture-{kind}", p99_itl_ms=10.0 if kind == "no-slo-met"
                      else 150.0)
    opened, _ = create_study(spec, storage_url)
    if kind == "empty":
        return opened
    study = optuna.load_study(study_name=spec.name, storage=optuna_adapter.storage_of(opened.study),
                              sampler=optuna.samplers.RandomSampler(seed=seed))
    dists = opened.space.distributions()
    teller = _Teller(kind, spec, seed)
    waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
    for number in range(min(n, waiting)):  # the baselines, asked and told as a worker does
        trial = study.ask(dists)
        a = TrialRecord.from_user_attrs(trial.user_attrs)
        asked = TrialRecord(baseline=a.baseline, flags=a.flags, launch=a.launch)
        tell(study, trial, teller.told(number, asked, dict(a.flags), None))
    proposals = _proposals(kind, opened.space, seed)
    for number in range(waiting, n):  # the rest stored in one write each
        params = next(proposals)
        attrs, flags, infeasible = _propose(opened.space, params)
        told = teller.told(number, attrs, flags, infeasible)
        study.add_trial(optuna.trial.create_trial(
            state=TrialState.COMPLETE if told.state == "complete" else TrialState.FAIL,
            values=list(told.values) if told.values is not None else None,
            params={k: v for k, v in params.items() if k != OFF_GRID},
            distributions=dists, user_attrs=told.to_user_attrs(),
            constraints=dict(told.constraints) or None))
    if in_progress:
        study.ask(dists)
    return opened


@contextlib.contextmanager
def dashboard_process(storage_url: str, log: Path, study: str | None = None,
                      timeout_s: float = 90.0) -> Iterator[str]:
    """`tuner dashboard [STUDY] --storage URL` as a real subprocess on a free loopback port;
    yields its base URL once ``/api/meta`` answers; stopped (SIGTERM) on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "tuner", "dashboard", *([study] if study else []),
            "--storage", storage_url, "--port", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while not _answers(base + "/api/meta"):
            if proc.poll() is not None:
                raise RuntimeError(f"tuner dashboard exited with {proc.returncode}: "
                                   f"{log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"tuner dashboard did not answer in {timeout_s:.0f} s: "
                                   f"{log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield base
    finally:
        stopped(proc, 10)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False
