"""The engine flags the search treats by their role, named once here (pure).

The default sampler's probes scale the token budget and the sequence cap of a parent
configuration (``tuner.search.front.settings.PROBES``); the search names those roles, and
only the space knows which engine flags play them.
"""

BUDGET = "max_num_batched_tokens"  # tokens per engine step
SEQUENCES = "max_num_seqs"  # sequences per engine step
