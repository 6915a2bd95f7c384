"""Workers register themselves in the study's storage (host, process id, GPUs, heartbeat,
current trial and phase), so that status can be seen from anywhere. A background thread
beats for the worker and, through Optuna's heartbeat, for its running trial."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner import optuna_adapter

log = logging.getLogger(__name__)

PREFIX = "tuner.worker."
STOP = "tuner.stop"


def worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Registration:
    """This worker's record in the study, kept fresh by ``beat``."""

    def __init__(self, study: optuna.Study, gpus: tuple[int, ...], interval_s: float) -> None:
        self.study, self.interval_s = study, interval_s
        self.id = worker_id()
        self.info: dict[str, Any] = {
            "host": socket.gethostname(), "pid": os.getpid(), "gpus": list(gpus),
            "started": time.time(), "state": "running", "trial": None, "phase": "idle",
            "phase_since": time.time(), "interval_s": interval_s}
        self.trial_id: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def set(self, **changes: Any) -> None:
        with self._lock:
            if "phase" in changes and changes["phase"] != self.info.get("phase"):
                changes.setdefault("phase_since", time.time())
            self.info.update(changes)

    def running(self, trial: optuna.Trial) -> None:
        """This worker now runs ``trial``: name the worker on it and beat for it at once.
        Optuna never calls a trial without a heartbeat stale, so a worker killed before
        its next periodic beat would otherwise leave the trial running for ever."""
        self.trial_id = optuna_adapter.trial_id(trial)
        self.set(trial=trial.number, phase="propose")
        self.beat()
        trial.set_user_attr("worker", self.id)

    def claim(self, trial: FrozenTrial) -> None:
        """Optuna has just made ``trial`` RUNNING for this worker, before the sampler
        proposes its parameters: name the worker on it and beat for it at once, so that
        it is failed as stale if the worker dies while the sampler runs.

        The heartbeat is written first: Optuna never closes a running trial that has no
        heartbeat, so a worker killed after naming itself but before its first beat left
        the trial RUNNING for ever (seen in CI: a trial with a worker and no heartbeat)."""
        self.trial_id = optuna_adapter.frozen_trial_id(trial)
        self.set(trial=trial.number, phase="propose")
        self.beat()
        try:
            optuna_adapter.set_trial_user_attr(self.study, trial, "worker", self.id)
        except Exception:  # the storage may be down; `tell` names the worker again
            pass

    def beat(self) -> bool:
        """Write its trial's heartbeat, then the worker's record; False when the storage
        did not take them (the next beat retries). The heartbeat goes first, so that a
        worker killed between the two writes still leaves a trial that can be closed."""
        with self._lock:
            info = {**self.info, "heartbeat": time.time()}
            trial_id = self.trial_id
        try:
            if trial_id is not None:
                optuna_adapter.record_heartbeat(self.study, trial_id)
            self.study.set_user_attr(PREFIX + self.id, info)
        except Exception as e:  # the storage may be down for a while; the next beat retries
            log.debug("heartbeat of %s not written: %s", self.id, e)
            return False
        return True

    def tick(self) -> None:
        """One turn of the heartbeat thread: beat, then close other workers' stale trials,
        only once this beat is written. After an outage longer than the grace period this
        worker's own trial looks stale until its beat lands: closing it then failed a trial
        that was still measuring and queued a retry of it (the measurement was kept as a
        copy, but the study's budget counted the trial three times)."""
        if not self.beat():
            return
        try:
            optuna.storages.fail_stale_trials(self.study)
        except Exception:
            pass

    def _run(self) -> None:
        # Beat twice per interval, and close other workers' stale trials each time, so a
        # dead worker's trial is failed within two intervals while any worker lives.
        while not self._stop.wait(self.interval_s / 2):
            self.tick()

    def close(self, state: str = "exited") -> None:
        self._stop.set()
        self.set(state=state, trial=None, phase="exited")
        self.trial_id = None
        self.beat()


def stop_requested(study: optuna.Study) -> bool:
    return bool(study.user_attrs.get(STOP))
