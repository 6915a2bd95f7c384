"""Which inter-token gaps a run observed, and when its ITL figures say nothing (pure).

A request of N output tokens has N - 1 inter-token gaps. The client sees a gap as its own
only when the token after it arrived in a read of its own. It misses gaps when the server
puts several tokens in one message (vLLM's ``stream_interval``, or a server that sends the
whole reply at once) and when a late client finds several messages in one read (their ITL is
then 0, as in vLLM's client). Two shares:

* ``itl_gap_share``: arrivals after the first over the N - 1 gaps expected. vLLM's per-message
  ITL (``*_itl_ms``) describes the server's token timing only when this is near 1.
* ``token_gap_share``: arrivals after the first over the server's messages after the first:
  the client missed none of the server's messages. The per-token figures (``*_itl_per_token_ms``,
  TPOT) hold whatever the server puts in a message, as long as this is near 1 and the server
  sent more than one message.

A run below the study's ``min_gap_share`` for a metric's family is not a measurement of that
metric: ``unobservable`` says why, and the runner refuses the trial rather than tell the
study a p99 ITL of 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tuner.loadgen.client import RequestOutput

ITL = "itl"  # vLLM's per-message ITL
PER_TOKEN = "itl_per_token"  # and TPOT


def gap_counts(outputs: Sequence[RequestOutput]) -> dict[str, float]:
    """Counts over the successful requests: messages, tokens, multi-token messages, zero
    gaps (message ITLs of exactly 0), coalesced reads, expected and observed gaps, shares."""
    ok = [o for o in outputs if o.success]
    expected = sum(max(0, (o.output_tokens or 1) - 1) for o in ok)
    observed = sum(max(0, o.arrivals - 1) for o in ok)
    later_messages = sum(max(0, o.chunks - 1) for o in ok)
    return {
        "messages": sum(o.chunks for o in ok),
        "tokens": sum(o.output_tokens or 1 for o in ok),
        "multi_token_messages": sum(o.multi_token_messages for o in ok),
        "zero_gaps": sum(1 for o in ok for x in o.itl if x == 0.0),
        "coalesced_reads": sum(o.coalesced_reads for o in ok),
        "single_message_replies": sum(1 for o in ok if o.chunks == 1 and o.output_tokens > 1),
        "expected_gaps": expected,
        "observed_gaps": observed,
        "itl_gap_share": observed / expected if expected else 1.0,
        "token_gap_share": (observed / later_messages if later_messages
                            else (0.0 if expected else 1.0)),
    }


def family(metric: str) -> str | None:
    """Which gap share a metric needs: ``ITL``, ``PER_TOKEN`` or None (needs no gaps)."""
    if "_itl_per_token_" in metric or "_tpot_" in metric:
        return PER_TOKEN
    if metric.endswith("_itl_ms"):
        return ITL
    return None


def unobservable(counts: dict[str, float], min_share: float,
                 loop_lag_max_ms: float | None = None) -> dict[str, str]:
    """Family -> why its figures describe no inter-token timing, for the families whose share
    is under ``min_share``. ``loop_lag_max_ms`` (the client's own event-loop lag, see
    ``lag``) tells a client that read late from a server that wrote several messages at once:
    the reason names it."""
    out: dict[str, str] = {}
    expected = int(counts.get("expected_gaps", 0))
    if not expected:
        return out
    observed, messages = int(counts["observed_gaps"]), int(counts["messages"])
    share = counts["itl_gap_share"]
    if share < min_share:
        why = _why(counts, loop_lag_max_ms)
        out[ITL] = (f"ITL not observable: {observed} of {expected} inter-token gaps seen "
                    f"({share:.0%}, under {min_share:.0%}): {why}")
    token_share = counts["token_gap_share"]
    if token_share < min_share:
        out[PER_TOKEN] = (f"per-token ITL not observable: {observed} gaps between "
                          f"{messages} messages for {int(counts['tokens'])} tokens "
                          f"({token_share:.0%} of the message gaps, under {min_share:.0%}): "
                          f"{_why(counts, loop_lag_max_ms)}")
    return out


def _why(counts: dict[str, float], loop_lag_max_ms: float | None = None) -> str:
    parts = []
    if counts["single_message_replies"]:
        parts.append(f"{int(counts['single_message_replies'])} replies came in one message")
    if counts["coalesced_reads"]:
        parts.append(f"{int(counts['coalesced_reads'])} reads found several messages at once "
                     f"({int(counts['zero_gaps'])} zero gaps: the client read late, or the "
                     "server wrote them together)")
        if loop_lag_max_ms is not None:
            parts[-1] += (f"; the client's event loop ran up to {loop_lag_max_ms:.0f} ms "
                          "late (a loop as late as a reply is long reads it whole)")
    if counts["multi_token_messages"]:
        parts.append(f"{int(counts['multi_token_messages'])} of {int(counts['messages'])} "
                     "messages carried several tokens (stream_interval > 1, or a server "
                     "process that lagged and merged its steps); the per-token "
                     "ITL (p99_itl_per_token_ms) divides their gaps")
    return "; ".join(parts) or "too few gaps seen"


def first_unobservable(metrics: Iterable[str], reasons: dict[str, str]) -> str | None:
    """The reason that the first of ``metrics`` needing an unobservable family cannot be
    told, or None."""
    for metric in metrics:
        fam = family(metric)
        if fam is not None and fam in reasons:
            return f"{metric}: {reasons[fam]}"
    return None
