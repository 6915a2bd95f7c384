"""Paged KV blocks with vLLM's prefix caching (pure).

Blocks hold ``block_size`` tokens. With prefix caching, a full block of prompt tokens is
known by a hash chained over every block before it (``hash((parent, tokens))``, as vLLM's
``hash_block_tokens``), so two prompts share a cached block only if they share everything up
to its end. Freed cached blocks stay reusable until evicted, least recently freed first, the
tail of a request before its head (vLLM frees blocks in reverse order).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

ROOT_HASH = 0x5EED


def block_hashes(tokens: Sequence[int], block_size: int, parent: int = ROOT_HASH) -> list[int]:
    """The chain of hashes of every full block of ``tokens``."""
    out: list[int] = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash((parent, tuple(tokens[start:start + block_size])))
        out.append(parent)
    return out


class BlockPool:
    """Counts of free, in-use and cached blocks; per request: ``n_blocks`` and ``registered``.

    A request object needs the attributes ``n_blocks`` (int), ``registered`` (list of the
    hashes of its blocks that are in the cache) and ``hashes`` (its prompt's block hashes).
    """

    def __init__(self, num_blocks: int, block_size: int, caching: bool) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.caching = caching
        self.free_plain = num_blocks
        self.refs: dict[int, int] = {}  # hash -> number of requests holding it
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached, held by none (LRU first)
        self.queries = 0  # prompt tokens looked up
        self.hits = 0  # of which found cached

    def num_free(self) -> int:
        return self.free_plain + len(self.evictable)

    def usage(self) -> float:
        return 1.0 - self.num_free() / self.num_blocks if self.num_blocks else 0.0

    def match(self, hashes: Sequence[int], prompt_len: int) -> list[int]:
        """The longest cached prefix of ``hashes`` (at least one prompt token left to compute)."""
        if not self.caching:
            return []
        limit = (prompt_len - 1) // self.block_size
        found: list[int] = []
        refs = self.refs
        for h in hashes[:limit]:
            if h not in refs:
                break
            found.append(h)
        return found

    def can_admit(self, hits: Sequence[int], need: int) -> bool:
        """Whether ``need`` new blocks fit once the ``hits`` are taken out of the free queue."""
        touched = sum(1 for h in hits if h in self.evictable)
        return need <= self.num_free() - touched

    def take_hits(self, req, hits: Sequence[int]) -> None:
        """Admit ``req`` holding its cached prefix ``hits``; counts the lookup (in tokens, as
        vLLM's prefix_cache_queries/hits counters)."""
        if self.caching:
            self.queries += req.prompt_len
            self.hits += len(hits) * self.block_size
        for h in hits:
            self.refs[h] += 1
            self.evictable.pop(h, None)
        req.registered = list(hits)
        req.n_blocks = len(hits)

    def allocate(self, req, need: int) -> None:
        """Give ``req`` ``need`` more blocks (the caller checked they fit)."""
        take = min(need, self.free_plain)
        self.free_plain -= take
        for _ in range(need - take):  # evict least recently freed cached blocks
            h, _ = self.evictable.popitem(last=False)
            del self.refs[h]
        req.n_blocks += need

    def commit(self, req, computed_prompt_tokens: int) -> None:
        """Register the request's newly completed prompt blocks in the cache."""
        if not self.caching:
            return
        full = computed_prompt_tokens // self.block_size
        done = req.committed
        if full <= done:
            return
        refs = self.refs
        for h in req.hashes[done:full]:
            if h in refs:  # computed twice at once: keep this copy out of the cache
                continue
            refs[h] = 1
            req.registered.append(h)
        req.committed = full

    def free(self, req) -> None:
        """Release every block of ``req``; its cached blocks become evictable, tail first."""
        refs, evictable = self.refs, self.evictable
        for h in reversed(req.registered):
            n = refs[h] - 1
            refs[h] = n
            if n == 0:
                evictable[h] = None
        self.free_plain += req.n_blocks - len(req.registered)
        req.n_blocks = 0
        req.registered = []
        req.committed = 0

    def blocks_needed_from(self, held: int, num_tokens: int) -> int:
        """New blocks to hold ``num_tokens`` tokens when ``held`` are already held."""
        return max(0, -(-num_tokens // self.block_size) - held)
