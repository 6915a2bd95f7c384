"""The server's own view of a run, from its Prometheus ``/metrics`` page.

Counters are read before and after the run and reported as deltas; the KV-cache usage and
running-requests gauges are polled during the run and reported as their peaks (a peak well
under a cap says the cap never bound: the search reads it, ``tuner.space.unreached``). A
metric the server does not export (or a server without ``/metrics``, or a page past
``client.MAX_PAGE_BYTES``) is left out of the result, never an error.
"""

from __future__ import annotations

import asyncio

import aiohttp

from tuner.loadgen.cancel import cancel_and_wait
from tuner.loadgen.client import MAX_PAGE_BYTES, read_capped

COUNTERS = {
    "preemptions": "vllm:num_preemptions_total",
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
}
KV_USAGE = "vllm:kv_cache_usage_perc"
GAUGES = {"kv_cache_usage_peak": KV_USAGE, "running_peak": "vllm:num_requests_running"}
WANTED = (*COUNTERS.values(), *GAUGES.values())


def parse_metrics(text: str, names: tuple[str, ...] = WANTED) -> dict[str, float]:
    """Sum each wanted metric over its label sets (exposition text format; pure)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#" or not line.startswith("vllm:"):
            continue
        if "{" in line:  # name{labels} value [timestamp]; label values may hold spaces
            name_part, rest = line.split("{", 1)[0], line.rsplit("}", 1)[-1]
        else:
            name_part, _, rest = line.partition(" ")
        if name_part not in names:
            continue
        fields = rest.split()
        try:
            value = float(fields[0])
        except (IndexError, ValueError):
            continue
        found[name_part] = found.get(name_part, 0.0) + value
    return found


def server_view(before: dict[str, float] | None, after: dict[str, float] | None,
                peaks: dict[str, float] | None = None) -> dict[str, float]:
    """Deltas of the counters present in both scrapes, and the gauges' peaks seen
    (``peaks``: by metric name, ``GaugePoller.peaks``)."""
    view: dict[str, float] = {}
    if before is not None and after is not None:
        for key, name in COUNTERS.items():
            if name in before and name in after:
                view[key] = after[name] - before[name]
    for key, name in GAUGES.items():
        if peaks and name in peaks:
            view[key] = peaks[name]
    return view


async def scrape(session: aiohttp.ClientSession, base_url: str) -> dict[str, float] | None:
    """The wanted metrics now, or None when the page cannot be read."""
    try:
        async with session.get(f"{base_url}/metrics") as resp:
            if resp.status != 200:
                return None
            page, whole = await read_capped(resp, MAX_PAGE_BYTES)
            return parse_metrics(page.decode()) if whole else None
    except (aiohttp.ClientError, asyncio.TimeoutError, UnicodeDecodeError):
        return None


class GaugePoller:
    """Polls the gauges (``GAUGES``) every ``interval_s`` while the run lasts; keeps each
    one's peak, by metric name."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, interval_s: float) -> None:
        self.session, self.base_url, self.interval_s = session, base_url, interval_s
        self.peaks: dict[str, float] = {}
        self._task: asyncio.Task | None = None

    def observe(self, metrics: dict[str, float] | None) -> None:
        for name in GAUGES.values():
            if metrics and name in metrics:
                self.peaks[name] = max(self.peaks.get(name, metrics[name]), metrics[name])

    async def _loop(self) -> None:
        while True:
            self.observe(await scrape(self.session, self.base_url))
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
