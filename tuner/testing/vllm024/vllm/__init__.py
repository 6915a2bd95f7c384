"""Stand-in for an installed vLLM 0.24.0 (see ../README.md): only its serve help."""

__version__ = "0.24.0"
