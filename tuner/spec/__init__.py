"""The study file's schema, pure: what a study asks for, validated at the edge, and the
durations it writes. Every layer above reads it; it reads only the load generator's specs."""

from tuner.spec.study import StudySpec

__all__ = ["StudySpec"]
