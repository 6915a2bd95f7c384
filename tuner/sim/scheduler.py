"""Continuous batching as vLLM schedules it, one engine step at a time (pure, no clock).

Chunked prefill on (vLLM V1): each step first serves the running requests in order (a decode
takes one token, an unfinished prefill the rest of its prompt up to the token budget), then
admits waiting requests while the budget, ``max_num_seqs`` and the KV blocks allow; prefills
are cut into chunks to fit the budget. When a running request needs a block and none is free,
the lowest-priority running request (the last admitted) is preempted: its blocks are freed
and it waits at the head of the queue to be recomputed. No admissions in a step that preempted.

Chunked prefill off, ``mixed_unchunked`` (vLLM V1, measured on vLLM 0.24): as above, but a
prompt is admitted only whole (admission stops at the first prompt that does not fit the
budget left after the decodes), so decodes share their steps with whole prefills.

Chunked prefill off, not ``mixed_unchunked`` (the article's time, vLLM V0): a step is either a
prefill step (whole prompts of waiting requests, up to the budget) or, when none can be
admitted, a decode step over every running request. Prefills go first, so decodes stall
while prompts arrive.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tuner.sim.config import EngineConfig
from tuner.sim.kvcache import BlockPool


@dataclass(eq=False, slots=True)
class Request:
    """One request's progress through the engine (mutable; the scheduler owns it)."""

    rid: int
    prompt_len: int
    max_tokens: int
    hashes: list[int] = field(default_factory=list)  # prompt block hashes (prefix caching)
    output: int = 0  # tokens generated
    computed: int = 0  # tokens whose KV is computed
    n_blocks: int = 0
    registered: list[int] = field(default_factory=list)
    committed: int = 0
    preemptions: int = 0
    cached_tokens: int = 0
    finished: bool = False
    handle: object = None  # the front end's per-request channel
    num_tokens: int = 0  # prompt + output, kept up to date by the scheduler

    def __post_init__(self) -> None:
        self.num_tokens = self.prompt_len + self.output


@dataclass(frozen=True, slots=True)
class Step:
    """What one step computes: (request, tokens, context before) per scheduled request, and
    the sums the step-time model needs."""

    work: list[tuple[Request, int, int]]
    num_tokens: int
    num_decodes: int
    num_logits: int
    attn_ctx: float
    kv_read: int


class Scheduler:
    """vLLM's scheduler over a BlockPool; ``schedule()`` then ``complete(step)``, repeatedly."""

    def __init__(self, cfg: EngineConfig, num_blocks: int, mixed_unchunked: bool = False) -> None:
        self.cfg = cfg
        self.mixed_unchunked = mixed_unchunked
        self.pool = BlockPool(num_blocks, cfg.block_size, cfg.enable_prefix_caching)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.preemptions = 0

    def add(self, req: Request) -> None:
        self.waiting.append(req)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> Step:
        work: list[tuple[Request, int, int]] = []
        chunked = self.cfg.enable_chunked_prefill
        if chunked or self.mixed_unchunked:
            before = self.preemptions
            budget = self._schedule_running(work, self.cfg.max_num_batched_tokens)
            if self.preemptions == before and len(work) == len(self.running) and budget > 0:
                self._admit(work, budget, chunked=chunked)
        elif not self._admit(work, self.cfg.max_num_batched_tokens, chunked=False):
            self._schedule_running(work, None)
        tokens = decodes = logits = kv = 0
        attn = 0.0
        for r, n, c in work:
            tokens += n
            kv += c
            if n == 1:
                attn += c + 1
            else:
                attn += n * c + n * (n + 1) * 0.5
            if c >= r.prompt_len:
                decodes += 1
            if c + n >= r.num_tokens:
                logits += 1
        return Step(work, tokens, decodes, logits, attn, kv)

    def _schedule_running(self, work: list, budget: int | None) -> int:
        """Schedule running requests in order, preempting from the back; the budget left."""
        pool, running, bs = self.pool, self.running, self.pool.block_size
        cap = self.cfg.long_prefill_token_threshold
        unlimited = budget is None
        if unlimited:
            budget = 1 << 62
        free = pool.num_free()
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            c = req.computed
            n = req.num_tokens - c
            if 0 < cap < n:  # vLLM's long_prefill_token_threshold
                n = cap
            if n > budget:
                n = budget
            need = -(-(c + n) // bs) - req.n_blocks
            if need > 0:
                while need > free:
                    victim = running.pop()
                    self._preempt(victim)
                    free = pool.num_free()
                    if victim is req:
                        return 0 if unlimited else budget
                pool.allocate(req, need)
                free -= need
            work.append((req, n, c))
            budget -= n
            i += 1
        return 0 if unlimited else budget

    def _preempt(self, req: Request) -> None:
        self.pool.free(req)
        req.computed = 0
        req.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(req)

    def _admit(self, work: list, budget: int, chunked: bool) -> int:
        """Admit waiting requests (prefix hits first); how many were admitted."""
        pool, waiting, running, admitted = self.pool, self.waiting, self.running, 0
        cap = self.cfg.long_prefill_token_threshold
        while waiting and budget > 0 and len(running) < self.cfg.max_num_seqs:
            req = waiting[0]
            hits = pool.match(req.hashes, req.prompt_len) if req.hashes else []
            start = len(hits) * pool.block_size
            n = req.num_tokens - start
            if 0 < cap < n and chunked:  # vLLM's long_prefill_token_threshold
                n = cap
            if n > budget:
                if not chunked:
                    break
                n = budget
            need = pool.blocks_needed_from(len(hits), start + n)
            if not pool.can_admit(hits, need):
                break
            waiting.popleft()
            pool.take_hits(req, hits)
            req.committed = len(hits)
            req.computed = start
            req.cached_tokens = start
            pool.allocate(req, need)
            running.append(req)
            work.append((req, n, start))
            budget -= n
            admitted += 1
        return admitted

    def complete(self, step: Step) -> list[Request]:
        """Apply a finished step; the requests that emitted a token (``finished`` set if done)."""
        emitted: list[Request] = []
        pool, max_len, bs = self.pool, self.cfg.max_model_len, self.pool.block_size
        done = False
        for req, n, _ in step.work:
            if req.finished:  # aborted by its client while the step ran
                continue
            c = req.computed + n
            req.computed = c
            if req.hashes and req.committed * bs < req.prompt_len:
                pool.commit(req, min(c, req.prompt_len))
            if c >= req.num_tokens:
                req.output += 1
                req.num_tokens += 1
                if req.output >= req.max_tokens or req.num_tokens >= max_len:
                    req.finished = done = True
                    pool.free(req)
                emitted.append(req)
        if done:
            self.running = [r for r in self.running if not r.finished]
        return emitted
