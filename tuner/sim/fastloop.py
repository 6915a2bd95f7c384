"""The offline evaluator's fast path: the same scheduling rules as ``scheduler.py``, with
decoding requests advanced lazily (pure).

In a step every decoding request computes exactly one token: decodes come first in vLLM's
running order and ``max_num_seqs <= max_num_batched_tokens`` guarantees they fit the budget.
So a decoder's progress is ``computed_at_anchor + (epoch - anchor)``, where ``epoch`` counts
decode steps, and the only per-request work left is at its events: a new KV block every
``block_size`` tokens, and its last token. A step then costs time in proportion to its events
and prefills, not to the number of sequences. Whenever blocks run short (a preemption would
follow), ``Preempted`` is raised and the caller runs the reference scheduler instead; the
tests check that both give the same outcome.
"""

from __future__ import annotations

from collections import defaultdict, deque

from tuner.sim.core import EngineCore
from tuner.sim.scheduler import Request
from tuner.sim.steptime import launch_bound, step_seconds


class Preempted(Exception):
    """Blocks ran out: this configuration needs the reference scheduler."""


def run_closed_loop_fast(core: EngineCore, plan, hashes, concurrency: int, n: int) -> dict:
    """``grid.run_closed_loop`` without per-token work; ITLs come back as (value, count)."""
    cfg, pool, coef = core.cfg, core.scheduler.pool, core.coef
    bs, budget_max, max_len = cfg.block_size, cfg.max_num_batched_tokens, cfg.max_model_len
    chunked, max_seqs = cfg.enable_chunked_prefill, cfg.max_num_seqs
    mixed = chunked or core.scheduler.mixed_unchunked  # decodes share steps with prefills
    waiting: deque[Request] = deque()
    prefilling: list[Request] = []  # running, prompt not done (always after the decoders)
    block_at: dict[int, list[Request]] = defaultdict(list)
    finish_at: dict[int, list[Request]] = defaultdict(list)
    arrival = [0.0] * n
    anchor = [0] * n  # epoch at which a decoder's progress was last written down
    first_token_t = [0.0] * n
    ttft: list[float] = []
    itl_vals: list[float] = []
    itl_counts: list[int] = []
    itl_steps: list[int] = []  # the step (1-based) each ITL entry ended at
    step_t: list[float] = []  # the end time of every step
    step_prefills: list[int] = []  # prompts every step completed
    step_launch_bound: list[bool] = []  # whether the step waited on eager dispatch
    t = 0.0
    epoch = 0  # decode steps so far
    n_dec = 0
    base_sum = 0  # sum over decoders of (computed_at_anchor - anchor)
    last_decode_t = 0.0
    fresh: list[Request] = []  # decoders that have not decoded yet (own last-token time)
    issued = output_tokens = 0

    def issue(now: float) -> None:
        nonlocal issued
        i = issued
        issued += 1
        arrival[i] = now
        waiting.append(Request(i, plan.prompt_lens[i], plan.output_lens[i],
                               list(hashes[i]) if hashes else []))

    def to_decode(r: Request) -> None:
        nonlocal n_dec, base_sum
        # r.computed == r.num_tokens - 1; anchor at the current epoch
        anchor[r.rid] = epoch
        n_dec += 1
        base_sum += r.computed - epoch
        gap = (-r.computed) % bs
        block_at[epoch + gap].append(r)
        left = min(r.max_tokens - r.output, max_len - r.num_tokens)
        finish_at[epoch + left - 1].append(r)

    for _ in range(min(concurrency, n)):
        issue(0.0)
    while waiting or prefilling or n_dec:
        work: list[tuple[Request, int, int]] = []
        decode = mixed or not waiting
        if not mixed and waiting:  # prefill-first: whole prompts, then decodes
            work = _admit(waiting, prefilling, n_dec, pool, budget_max, max_seqs, False)
            decode = not work
        budget = budget_max
        grow = block_at.pop(epoch, ()) if decode and n_dec else ()
        need = len(grow)
        if decode and mixed:
            budget -= n_dec
            for r in prefilling:
                if budget <= 0:
                    break
                c = r.computed
                k = min(r.num_tokens - c, budget)
                need += -(-(c + k) // bs) - r.n_blocks
                work.append((r, k, c))
                budget -= k
        if need > pool.num_free():
            raise Preempted
        for r in grow:
            pool.allocate(r, 1)
            block_at[epoch + bs].append(r)
        for r, k, c in work:
            if r.n_blocks < -(-(c + k) // bs):
                pool.allocate(r, -(-(c + k) // bs) - r.n_blocks)
        if mixed and decode and budget > 0 and len(work) == len(prefilling):
            work += _admit(waiting, prefilling, n_dec, pool, budget, max_seqs, chunked)
        core.observe(n_dec + len(prefilling))
        d = n_dec if decode else 0
        if not d and not work:
            raise RuntimeError("simulated engine stalled with work queued")
        tokens, attn, kv, logits = d, 0.0, 0, d
        if d:
            ctx = base_sum + d * epoch
            attn, kv = ctx + d, ctx
        for r, k, c in work:
            tokens += k
            attn += k * c + k * (k + 1) * 0.5
            kv += c
            if c + k >= r.num_tokens:
                logits += 1
        dt = step_seconds(coef, tokens, d + len(work), logits, attn, kv)
        t += dt
        core.steps += 1
        step_t.append(t)
        step_launch_bound.append(launch_bound(coef, tokens, d + len(work), logits, attn, kv))
        step_prefills.append(0)
        if d:
            old = d - len(fresh)
            if old:
                itl_vals.append(t - last_decode_t)
                itl_counts.append(old)
                itl_steps.append(core.steps)
            for r in fresh:
                itl_vals.append(t - first_token_t[r.rid])
                itl_counts.append(1)
                itl_steps.append(core.steps)
            fresh = []
            last_decode_t = t
            output_tokens += d
            done = finish_at.pop(epoch, ())
            epoch += 1
            for r in done:
                n_dec -= 1
                base_sum -= r.computed - anchor[r.rid]
                steps = epoch - anchor[r.rid]
                r.computed += steps
                r.output += steps
                r.num_tokens += steps
                r.finished = True
                pool.free(r)
                _drop(block_at, r)
                if issued < n:
                    issue(t)
        for r, k, _ in work:
            r.computed += k
            if r.hashes and r.committed * bs < r.prompt_len:
                pool.commit(r, min(r.computed, r.prompt_len))
            if r.computed >= r.num_tokens:
                prefilling.remove(r)
                step_prefills[-1] += 1
                r.output += 1
                r.num_tokens += 1
                output_tokens += 1
                if r.output == 1:
                    ttft.append(t - arrival[r.rid])
                first_token_t[r.rid] = t
                if r.output >= r.max_tokens or r.num_tokens >= max_len:
                    r.finished = True
                    pool.free(r)
                    if issued < n:
                        issue(t)
                else:
                    to_decode(r)
                    fresh.append(r)
    return {"duration_s": t, "output_tokens": output_tokens, "ttft": ttft,
            "itl_values": itl_vals, "itl_counts": itl_counts, "itl_steps": itl_steps,
            "step_t": step_t, "step_prefills": step_prefills,
            "step_launch_bound": step_launch_bound,
            "hit_rate": pool.hits / pool.queries if pool.queries else 0.0}


def _drop(block_at: dict[int, list[Request]], r: Request) -> None:
    """Remove a finished decoder's pending block event (at most one is pending)."""
    for key, reqs in block_at.items():
        if r in reqs:
            reqs.remove(r)
            return


def _admit(waiting, prefilling, n_dec, pool, budget, max_seqs, chunked) -> list:
    """scheduler.Scheduler._admit on this state (without preemption)."""
    work = []
    bs = pool.block_size
    while waiting and budget > 0 and n_dec + len(prefilling) < max_seqs:
        req = waiting[0]
        hits = pool.match(req.hashes, req.prompt_len) if req.hashes else []
        start = len(hits) * bs
        k = req.num_tokens - start
        if k > budget:
            if not chunked:
                break
            k = budget
        need = pool.blocks_needed_from(len(hits), start + k)
        if not pool.can_admit(hits, need):
            break
        waiting.popleft()
        pool.take_hits(req, hits)
        req.committed = len(hits)
        req.computed = start
        req.cached_tokens = start
        pool.allocate(req, need)
        prefilling.append(req)
        work.append((req, k, start))
        budget -= k
    return work
