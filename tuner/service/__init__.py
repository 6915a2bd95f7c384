"""The tuning service: launch a study's workers in the background, watch them, stop
them (``launch``, ``status``, ``stop``), and the read-only HTTP API (``api``)."""

from tuner.service.launch import Launched, LaunchError, launch
from tuner.service.status import StudyStatus, read as read_status, render as render_status
from tuner.service.stop import stop
from tuner.service.workers import WorkerView

__all__ = ["LaunchError", "Launched", "StudyStatus", "WorkerView", "launch", "read_status",
           "render_status", "stop"]
