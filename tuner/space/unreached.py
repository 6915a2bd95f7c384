"""Caps a measured trial's engine never reached, from its own report: one hook per flag
(``HOOKS``), the engine's knowledge kept with the space, not the search (pure).

The load generator reads the server's ``/metrics`` over a run (``TrialRecord.server``,
``tuner.loadgen.prometheus``): the peak of running requests, the peak KV-cache usage, the
preemptions and the prefix cache's queries and hits. Where a cap was never reached, moving
it further from what the engine used changes nothing the run did, so the trial would have
measured the same with the cap moved:

- ``max_num_seqs``: fewer requests ran at once than the cap allowed, at the peak; any cap
  from just above that peak to the space's top schedules the same steps. But when the
  launch leaves the CUDA-graph capture size to vLLM, the sequences also set it (twice the
  cap, at most 512 tokens): a step larger than it runs without a graph, so a cap is moved
  only as far as the graphs still cover every step that they covered (the same size, or
  one at least the token budget, which no step exceeds; nothing with ``--enforce-eager``).
- ``gpu_memory_utilization``: no preemption and the KV cache never nearly full; a larger
  share only adds blocks nothing used. (A smaller one would shrink the cache by an amount
  the report cannot tell: the weights' and activations' share is not in it.)
- ``enable_prefix_caching``: on, queried, and no prompt tokens found cached; off, the
  engine computes what it computed.

A surrogate learns each flag's effect with one length scale over the whole space; a flag
that is steep where it binds (a small cap) then looks uncertain everywhere, also where the
engine shows it did nothing, and the acquisition spent trials re-measuring a configuration
with such a flag moved (docs/decisions/0010). ``unbound_moves`` turns the report
into those configurations, which the sampler counts as measured with the trial's values
(``tuner.search.front.history``).

The gauges are polled, so a short peak between polls can be missed: a cap counts as
unreached only with the peak under ``MARGIN`` of it.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from optuna.distributions import BaseDistribution, CategoricalDistribution

from tuner.space.defaults import CAPTURE_TOP, cudagraph_capture_size
from tuner.space.distributions import movable
from tuner.space.levers import BUDGET
from tuner.space.levers import SEQUENCES as SEQS
from tuner.trials.parts import ServerView

MEMORY, PREFIX = "gpu_memory_utilization", "enable_prefix_caching"
MARGIN = 0.9  # a peak under 90% of a cap: the cap was never reached
NO_HITS = 0.01  # a prefix-cache hit rate under 1%: nothing was found cached


def unbound_moves(params: Mapping[str, Any],
                  server: ServerView | Mapping[str, float] | None,
                  space: Mapping[str, BaseDistribution],
                  flags: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Configurations that differ from ``params`` (what a trial ran with, in the space's
    terms) in one cap its engine's report ``server`` shows it never reached, moved to the
    end of the range where it stays unreached; each would have measured the same. Only
    flags the space searches; none without a report. ``flags``: every flag the trial ran
    with (``TrialRecord.flags``), for those the space does not search (vLLM's defaults
    where absent); ``server`` as stored is read as its ``ServerView``."""
    server = ServerView.of(server)
    if not server:
        return []
    ran = {**(flags or {}), **params}
    return [{**params, name: value} for name, hook in HOOKS.items()
            for value in hook(params, ran, server, space)
            if value is not None and value != params[name]]


def _seqs(params: Mapping[str, Any], ran: Mapping[str, Any], server: ServerView,
          space: Mapping[str, BaseDistribution]) -> list[Any]:
    """Fewer requests ran at once than the cap: any cap from just above the peak to the
    top where the CUDA graphs still cover the same steps."""
    seqs = _numeric(space, SEQS)
    peak = server.running_peak
    # a gauge polled as 0 over a run that served requests saw nothing (the CPU build's API
    # process can lag its engine by the whole of a short run): it tells no cap
    if seqs is None or peak is None or not 1 <= peak < MARGIN * params[SEQS]:
        return []
    graphs = _graph_floor(ran, params[SEQS])
    if graphs is None:  # the graphs cover other tokens with any other cap
        return []
    # vLLM wants the budget to cover the sequences: the top is the budget where it is
    # smaller (the trial's budget stays as it ran)
    top = min(seqs.high, ran.get(BUDGET, seqs.high))
    low = max(seqs.low, math.ceil(peak / MARGIN), graphs)
    return [top if top > params[SEQS] else None, low if low < params[SEQS] else None]


def _memory(params: Mapping[str, Any], ran: Mapping[str, Any], server: ServerView,
            space: Mapping[str, BaseDistribution]) -> list[Any]:
    """No preemption and the KV cache never nearly full: the space's largest share."""
    memory = _numeric(space, MEMORY)
    usage = server.kv_cache_usage_peak
    if (memory is not None and usage is not None and 0 < usage < MARGIN
            and (server.preemptions or 0.0) == 0 and memory.high > params[MEMORY]):
        return [memory.high]
    return []


def _prefix(params: Mapping[str, Any], ran: Mapping[str, Any], server: ServerView,
            space: Mapping[str, BaseDistribution]) -> list[Any]:
    """Prefix caching on, queried, and nothing found cached: off."""
    prefix = space.get(PREFIX)
    queries, hits = server.prefix_cache_queries or 0.0, server.prefix_cache_hits
    if (isinstance(prefix, CategoricalDistribution) and False in prefix.choices
            and params.get(PREFIX) is True and queries > 0 and hits is not None
            and hits < NO_HITS * queries):
        return [False]
    return []


Hook = Callable[[Mapping[str, Any], Mapping[str, Any], ServerView,
                 Mapping[str, BaseDistribution]], list]
# Each flag's hook: (what the trial ran with in the space's terms, every flag it ran with,
# its engine's report, the space) -> the values the flag could take and measure the same
HOOKS: dict[str, Hook] = {SEQS: _seqs, MEMORY: _memory, PREFIX: _prefix}


def _graph_floor(ran: Mapping[str, Any], seqs: int) -> int | None:
    """The smallest sequence cap whose CUDA graphs cover every step that ``seqs``'s covered
    (0: any cap, as with ``--enforce-eager`` or a capture size the launch gives), or None
    when only ``seqs`` itself does: below 256 sequences each cap captures a different size,
    unless both sizes reach the token budget."""
    if ran.get("enforce_eager") or "max_cudagraph_capture_size" in ran:
        return 0
    covered = min(cudagraph_capture_size(seqs), ran.get(BUDGET, math.inf))
    full = min(CAPTURE_TOP, ran.get(BUDGET, math.inf))
    if covered < full:
        return None
    return math.ceil(full / 2)


def _numeric(space: Mapping[str, BaseDistribution], name: str):
    """The flag's range when the space searches it as a number, else None."""
    d = space.get(name)
    return d if d is not None and not isinstance(d, CategoricalDistribution) and movable(d) \
        else None
