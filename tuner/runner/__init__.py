"""The trial runner: engines, server supervision, the trial loop, worker registration."""

from tuner.runner.worker import Summary, Worker, study_dir

__all__ = ["Summary", "Worker", "study_dir"]
