"""What the installed engine says of its own flags.

The study's own python is asked through vLLM's argument parser (``vllm serve --help=all`` in a
subprocess; tuner never imports vllm), and the answer is parsed into an ``Installed``: the
engine's name and version, each flag's spelling, kind, choices and default, and the batch
defaults vLLM's own code path picks on that host. ``helptext`` parses (pure), ``probe`` asks
and caches (I/O). The catalogue is checked against the answer in ``tuner.space.installed``.
"""

from tuner.installed.answer import EngineFlag, Installed
from tuner.installed.helptext import parse_answer, parse_help

__all__ = ["EngineFlag", "Installed", "parse_answer", "parse_help"]
