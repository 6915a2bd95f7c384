"""The trial loop: ask -> rules -> server -> benchmark -> stop -> tell, until the budget is
spent, the time is up, or the user stops it. A worker owns one GPU group. Several workers,
on one host or many, share a study through its storage; the sampler sees running trials.

Interrupts (Ctrl-C, SIGTERM, SIGHUP) stop the server, record the trial as stopped (and
enqueue it again) and end the worker cleanly. A worker that dies has its trial failed by
the storage heartbeat (``fail_stale_trials``, run here since ask/tell runs no heartbeat of
its own), and what its server left on the GPUs is killed by the next worker there
(``tuner.engine.orphans``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import threading
import time
import warnings
import zlib
from dataclasses import dataclass, field

import optuna

from tuner import optuna_adapter
from tuner.errors import LaunchError, StorageUnreachable, UsageError
from tuner.runner import asking, crosscheck
from tuner.engine import command as engine
from tuner.runner import confirm as confirmation
from tuner.runner.asking import Watched
from tuner.storage.claimlock import ClaimLock
from tuner.runner.guard import Guard
from tuner.runner.interrupts import deferred_interrupts, interrupts
from tuner.runner import trial as trials_run
from tuner.runner.decide import (MAX_DUPLICATES_IN_A_ROW, MAX_INVALID_IN_A_ROW, Run, decide,
                                 reason_to_stop)
from tuner.runner.measure import Rig, Slot, with_overhead
from tuner.runner.requeue import (queue_baselines_again, queue_reference, tell_failed,
                                  tell_stopped)
from tuner.runner.progress import Progress, told_summary
from tuner.runner.proposal import propose
from tuner.storage.registry import STOP, Registration, stop_requested
from tuner.runner.tell import tell
from tuner.engine import orphans
from tuner.engine.gpulock import GpuLocks
from tuner.engine.trust import EngineTrust
from tuner.search.sampler import make_sampler
from tuner.space.installed import unusable_here
from tuner.storage import OpenStudy, mask, open_study
from tuner.search.front import FrontSettings
from tuner.home import writable_folder
from tuner.storage.outage import retrying
from tuner.storage.database import cache_root, heartbeat_s, study_dir
from tuner.storage.studies import ask_study_engine, with_stored_search
from tuner.trials import pareto, queries, record
from tuner.trials.record import TrialRecord

log = logging.getLogger(__name__)

__all__ = ["MAX_DUPLICATES_IN_A_ROW", "MAX_INVALID_IN_A_ROW", "Summary", "Worker",
           "best_line"]


@dataclass
class Summary:
    told: dict[str, int] = field(default_factory=dict)
    reason: str = ""
    spent: int = 0  # this worker's trials that spent the budget (queries.spends_budget)

    def add(self, told: TrialRecord) -> None:
        outcome = str(told.outcome)
        self.told[outcome] = self.told.get(outcome, 0) + 1
        self.spent += queries.spends_budget(told)

    @property
    def launched(self) -> int:
        return sum(v for k, v in self.told.items() if k != record.DUPLICATE)


def best_line(opened: OpenStudy) -> str:
    """The best feasible measured value of the first objective so far."""
    obj = opened.spec.objectives[0]
    best = queries.best_value(queries.load_records(opened.study), obj.direction)
    return f"best {obj.metric} {best:,.1f}" if best is not None else "best: -"


_signalled: list[int] = []


def _sigterm_as_interrupt(signum, frame):
    # Noted as well as raised: a KeyboardInterrupt raised while the interpreter runs a
    # finaliser or a weakref callback is printed and dropped ("Exception ignored in"), and
    # the worker then went on starting trials; the loop checks the note before each one.
    _signalled.append(signum)
    raise KeyboardInterrupt


class _Registration(Registration):
    """Also answers `tuner stop --now` (the stop attr set to "now"): the heartbeat thread
    sends SIGTERM to this process once, which the trial loop turns into a clean stop."""

    _signalled = False

    def beat(self) -> bool:
        written = super().beat()
        if self._signalled or threading.current_thread() is not self._thread:
            return written
        try:
            now = self.study.user_attrs.get(STOP)
        except Exception:  # the storage may be down for a while
            return written
        if now == "now" and not self._stop.is_set():
            self._signalled = True
            os.kill(os.getpid(), signal.SIGTERM)
        return written


def _check_engine(opened: OpenStudy, gpus: tuple[int, ...], progress: Progress) -> None:
    """Ask this host's engine (the GPU box may have another vLLM than the host that created
    the study): a flag of the study it lacks is a UsageError naming it."""
    space = opened.space
    installed, note = ask_study_engine(opened.spec, gpus)
    if installed is None:
        progress.say(f"tuner: {note}")
        return
    problems = unusable_here(space.names, installed)
    if problems:
        raise UsageError(f"study {opened.spec.name} cannot run on this host: {problems[0]}")
    if space.engine and installed.label != space.engine:
        progress.say(f"tuner: this host runs {installed.label}; the study was created with "
                     f"{space.engine}")


class Worker:
    """Runs a stored study's trials on one slot of GPUs until the study's budget, its own
    count or time limit, a stop request or an interrupt ends it. Made by ``Worker.open``,
    which checks first that this host can run the study. Each trial is ask -> ``decide``
    (``tuner.runner.decide``: no engine needed) or measure on ``rig`` (engine, benchmark,
    clock: ``tuner.runner.measure.Rig``) -> tell."""

    def __init__(self, opened: OpenStudy, storage_url: str, slot: Slot,
                 n_trials: int | None = None, timeout_s: float | None = None,
                 progress: Progress | None = None, rig: Rig = Rig()) -> None:
        self.opened, self.storage_url, self.slot, self.rig = opened, storage_url, slot, rig
        spec = opened.spec
        self.registration: Registration | None = None
        # Each worker (and each restart of one) needs its own stream of random proposals:
        # the same seed would propose the same start-up configurations again (seen on the
        # GPU run: a resumed worker's first proposal duplicated the last worker's).
        seed = None if spec.search.seed is None else (
            spec.search.seed + zlib.crc32(f"{socket.gethostname()}-{os.getpid()}-"
                                          f"{time.time_ns()}".encode())) % 2**31
        self.study = optuna.load_study(study_name=spec.name,
                                       storage=optuna_adapter.storage_of(opened.study),
                                       sampler=Watched(make_sampler(
                                           spec.search.sampler, seed,
                                           front=FrontSettings.for_study(spec)), self._claim))
        self.gpus, self.n_trials, self.timeout_s = slot.gpus, n_trials, timeout_s
        self.progress = progress or Progress(spec.search.n_trials)  # the study's count
        self.summary = Summary()
        self.done = Run()
        self.claims = ClaimLock(storage_url, spec.name)
        self.started_at = rig.clock.time()

    @classmethod
    def open(cls, study_name: str, storage_url: str, gpus: tuple[int, ...],
             n_trials: int | None = None, timeout_s: float | None = None,
             progress: Progress | None = None, trust: EngineTrust | None = None) -> Worker:
        """The worker of ``study_name`` on ``gpus``, once this host can run it: the engine's
        program is trusted and here, ``gpus`` hold a server's tensor parallelism, the logs
        and caches are writable, and the engine here has the study's flags. UsageError or
        LaunchError (one line) otherwise, before any trial is asked."""
        opened = open_study(study_name, storage_url, heartbeat=True)
        spec = opened.spec
        (trust or EngineTrust.from_settings()).check(spec)  # the program is ours to choose
        if missing := engine.missing_program(spec):
            raise UsageError(f"study {study_name}: the engine program {missing} is not on "
                             "this host; install it, or give the worker's own with "
                             "--engine-python")
        if len(gpus) < spec.model.tensor_parallel_size:
            raise UsageError(f"study {study_name} needs {spec.model.tensor_parallel_size} GPUs "
                             f"per server (tensor parallel) but --gpus gives {len(gpus)}")
        # Checked before any trial is asked: a trial asked and then unable to write its
        # server's log was left RUNNING, and each restart of the worker spent another.
        slot = Slot(gpus, writable_folder(study_dir(study_name) / "logs",
                                          "the study's logs", LaunchError),
                    "", socket.gethostname(),
                    cache=writable_folder(cache_root(), "the engine caches", LaunchError))
        progress = progress or Progress(spec.search.n_trials)
        _check_engine(opened, gpus, progress)
        return cls(opened, storage_url, slot, n_trials, timeout_s, progress)

    def _claim(self, trial) -> None:
        """Optuna made ``trial`` RUNNING: it counts against the budget now, so the next
        worker may check the budget (``_done``)."""
        if self.registration is not None:
            self.registration.claim(trial)
        self.claims.release()

    def _done(self, started: float) -> str | None:
        """Why this worker stops now (``decide.reason_to_stop``), else None; then it holds
        the study's claim lock until its next trial is RUNNING (``_claim``), so that no
        other worker reads the budget in between and both start the last trial (issue 47
        case 8)."""
        self.claims.acquire()
        try:
            self.opened = with_stored_search(self.opened)
            spec, clock = self.opened.spec, self.rig.clock
            self.progress.total = spec.search.n_trials
            from tuner.runner.stopping import LAUNCHED_AT

            reason = reason_to_stop(
                spec, queries.load_records(self.study),
                dataclasses.replace(self.done, elapsed_s=clock.monotonic() - started),
                n_trials=self.n_trials, timeout_s=self.timeout_s,
                stop_asked=stop_requested(self.study),
                launched_at=float(self.study.user_attrs.get(LAUNCHED_AT) or self.started_at),
                now=clock.time())
        except BaseException:
            self.claims.release()
            raise
        if reason:
            self.claims.release()
        return reason

    def run(self) -> Summary:
        """Run trials, holding this slot's GPU locks until the worker ends, whatever ends
        it (locks handed over by `tuner launch` are taken over)."""
        spec = self.opened.spec
        with GpuLocks(self.gpus, spec.name):
            log.info("worker %s on study %s (%s), engine %s", self.gpus, spec.name,
                     mask(self.storage_url), spec.engine.kind)
            if killed := orphans.reap(self.gpus):
                self.progress.say(f"tuner: killed {len(killed)} engine process(es) that a "
                                  f"killed worker left running on GPU "
                                  f"{','.join(map(str, self.gpus))} (pids {killed})")
            return self._loop()

    def _loop(self) -> Summary:
        _signalled.clear()
        previous = {sig: signal.signal(sig, _sigterm_as_interrupt) for sig in interrupts()}
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message=".*Heartbeat.*")
        self.registration = _Registration(self.study, self.gpus, heartbeat_s())
        self.slot = dataclasses.replace(self.slot, worker=self.registration.id)
        self.registration.start()
        started, state, say = self.rig.clock.monotonic(), "exited", self.progress.say
        try:
            if self.opened.spec.search.reference_runs:
                self._db(lambda: queue_reference(self.study, self.opened.space, say))
            while True:
                if _signalled:
                    raise KeyboardInterrupt  # one that an earlier raise lost
                reason = self._db(lambda: self._done(started))
                if reason:
                    self.summary.reason = reason
                    break
                self._db(lambda: optuna.storages.fail_stale_trials(self.study))
                self._db(lambda: queue_baselines_again(self.study, self.opened.space, say))
                self._one_trial()
        except KeyboardInterrupt:
            self.summary.reason, state = "interrupted", "interrupted"
        finally:
            self.claims.release()
            self.registration.close(state)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return self.summary

    def _db(self, call, give_up=None):
        """A storage call that waits out a database outage (tuner.storage.outage)."""
        return retrying(call, url=self.storage_url, say=self.progress.say, give_up=give_up)

    def _one_trial(self) -> str:
        """Ask, decide or measure, tell: one trial, in the spirit of Optuna's
        ``_run_trial``; an error that is not the configuration's fails the trial and stops
        the worker, an interrupt records it as stopped (queued again)."""
        reg, spec, say = self.registration, self.opened.spec, self.progress.say
        try:
            trial = self._db(lambda: asking.ask(
                self.study, self.opened.space.distributions(),
                TrialRecord(worker=reg.id, host=self.slot.host)))
        finally:
            self.claims.release()  # given back in `_claim` already, unless the ask failed
        self._db(lambda: reg.running(trial))
        prop = self._db(lambda: propose(self.opened.space, trial))
        log.debug("trial %d: %s %s%s", trial.number, prop.baseline or "proposed",
                  dict(prop.flags), f" (repaired: {', '.join(prop.repaired)})"
                  if prop.repaired else "")
        base = dataclasses.replace(prop.record(), worker=reg.id, host=self.slot.host)
        records = self._db(lambda: queries.load_records(self.study))
        self.progress.begin(trial.number, queries.counted(records))
        t0 = self.rig.clock.monotonic()
        try:
            told = decide(spec, prop, base, records, trial.number) or self._measure(
                trial, prop, base)
        except KeyboardInterrupt:
            tell_stopped(self.study, trial, prop, base, say)
            raise
        except Exception as e:  # not the configuration's fault: the worker stops on it
            tell_failed(self.study, trial, base, e, say)
            raise
        if told.phases is not None:
            told = dataclasses.replace(told, phases=with_overhead(
                told.phases, self.rig.clock.monotonic() - t0))
        held = self._tell(trial, told)
        reg.trial_id = None
        reg.set(trial=None, phase="idle")
        self.done = self.done.after(told)
        self.summary.add(told)
        self.progress.end(told.outcome, told_summary(told, spec.capacity.reference_rate),
                          self._db(lambda: best_line(self.opened)))
        if held or told.interrupted:
            raise KeyboardInterrupt  # delivered now that the measurement is recorded
        return told.outcome

    def _measure(self, trial, prop, base: TrialRecord) -> TrialRecord:
        """Measure the proposal on an engine of this worker's rig: its confirmation
        runs (``confirm.runs_to_add``), the accuracy guard and, for this worker's first
        trials, the cross-check."""
        spec, slot, reg = self.opened.spec, self.slot, self.registration
        if self.summary.launched < spec.engine.crosscheck_trials and crosscheck.applicable(spec):
            slot = dataclasses.replace(slot, crosscheck=True)

        def phase(name: str) -> None:
            reg.set(phase=name)
            self.progress.set_phase(name)

        def confirmations(metrics) -> int:
            front = pareto.pareto_front(self._db(lambda: queries.load_records(self.study)),
                                        spec.objectives)
            return confirmation.runs_to_add(
                record.objective_values(spec, metrics), record.slo_constraints(spec, metrics),
                prop.baseline == record.DEFAULT_BASELINE, spec.search.confirm,
                spec.search.confirm_default, front, spec.objectives)

        confirming = spec.search.confirm or spec.search.confirm_default
        return trials_run.run(spec, prop.launch, trial.number, slot, base, phase,
                              confirmations if confirming else None, Guard(self.study),
                              rig=self.rig)

    def _tell(self, trial, told: TrialRecord) -> list[int]:
        """Record the trial with interrupts held; returns those that came meanwhile.

        An interrupt while the storage is unreachable ends the wait: the worker stops at
        once, and the trial, still running in the study, is closed by the heartbeat of a
        worker that lives (and queued again), as if this worker had died.
        """
        with deferred_interrupts() as held:
            try:
                self._db(lambda: tell(self.study, trial, told),
                         give_up=lambda: bool(held.pending))
            except StorageUnreachable:
                if not held.pending:
                    raise
                self.progress.say(f"trial {trial.number} not recorded: the storage is "
                                  "unreachable and the worker was asked to stop")
                raise KeyboardInterrupt from None
        return held.pending
