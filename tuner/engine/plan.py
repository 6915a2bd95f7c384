"""One trial's server, compiled from the study: what to run and how long to wait for it.

Built once per trial (``tuner.runner.plans.compile_trial``) after the launch was checked
against the catalogue and the trust rules; everything below reads this, never the study."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.engine.command import Launch


@dataclass(frozen=True)
class EnginePlan:
    """``launch``: the argv and environment; ``port`` it serves on; ``model``: the name it
    serves; the start and stop limits in seconds; ``gpu_label``: the GPU a record names
    when the box reports none (a simulator's GPU is marked simulated)."""

    kind: str
    launch: Launch
    port: int
    model: str
    start_timeout_s: float
    stop_grace_s: float
    gpu_label: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
