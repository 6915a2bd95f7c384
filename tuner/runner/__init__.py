"""The trial loop: ask a configuration, measure it on a started engine, tell the study."""

from tuner.runner.worker import Summary, Worker, study_dir

__all__ = ["Summary", "Worker", "study_dir"]
