"""Latencies in simulated time from the simulator's ``/sim/trace`` (``serve --sim-trace``).

Each traced request holds when it reached the engine (``submitted``) and each token's
modelled due time (``due``), both in wall seconds of a server that ran ``scale`` times
faster than real time. These are the model's own latencies, without the client's or the
host's delays: what a test or benchmark reads when the claim is about the model.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def trace_itls_ms(requests: Iterable[Mapping[str, Any]], scale: float) -> list[float]:
    """Every gap between a request's consecutive tokens, in simulated milliseconds."""
    return [(b - a) * scale * 1000 for r in requests for a, b in zip(r["due"], r["due"][1:])]


def trace_ttfts_ms(requests: Iterable[Mapping[str, Any]], scale: float) -> list[float]:
    """Each request's time from reaching the engine to its first token, in simulated
    milliseconds; requests with no token yet are left out."""
    return [(r["due"][0] - r["submitted"]) * scale * 1000 for r in requests if r["due"]]
