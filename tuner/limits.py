"""Upper bounds on what a study file or a command line may ask for.

A study file comes from the shared database, so whoever can write it chooses how much a
worker allocates: every count, length and duration of the schemas (``tuner.spec.study``,
``tuner.loadgen.spec``) is bounded here, far above anything a real run needs, so that a bound
is never a limit on a real study, only on a typo or a hostile value. Each says why it is
where it is.
"""

from __future__ import annotations

# Tokens in one prompt, reply, prefix or context: above every served model's context window.
MAX_TOKENS = 1 << 24
# A vocabulary: above every tokenizer's (the largest have a few hundred thousand ids).
MAX_VOCAB = 1 << 24
# Requests in one run (measured, warm-up, the early stop's cap, the prefixes or
# conversations they draw on): every request's body is built before the run starts, and a
# million is days of a real server's time at the rates a trial sees.
MAX_REQUESTS = 1_000_000
# Requests in flight at once: each holds its own connection, and one client host has fewer
# ports than this toward one server.
MAX_CONCURRENCY = 65_536
# Client processes of one run: more than any host has cores.
MAX_CLIENT_PROCESSES = 1024
# Turns of one multi-turn conversation (each turn sends the whole history again).
MAX_TURNS = 10_000
# Requests a second a client is asked to send: beyond what any client or server reaches.
MAX_REQUEST_RATE = 1e6
# Levels of one stored load-ladder curve: a ladder runs at most ``[capacity] max_levels``
# (50) levels and its repeats next to the edge, far fewer than this; every reader fits the
# capacity over all of a curve's levels, so a tampered curve of many more would hold up
# every one of them (``tuner.trials.curve``).
MAX_CURVE_LEVELS = 1000
# How many times faster than recorded a trace is replayed: a day's trace would then last
# under a tenth of a second, past any server.
MAX_SPEEDUP = 1e6
# Any duration (a run, a timeout, a start, a pause), in seconds: a week, where a trial
# takes minutes and a server starts in well under an hour.
MAX_DURATION_S = 7 * 86400.0
MAX_DURATION_MS = MAX_DURATION_S * 1000.0
# A relative half-width target: past 1 any interval meets it (stop at the first one), so
# a larger one means the same; this only refuses what is no number of that kind.
MAX_RELATIVE = 1000.0
# Tokens a second: above what a whole cluster generates.
MAX_THROUGHPUT = 1e9
# Trials of a study (and its patience, crosscheck count): each is minutes of a server's
# time, so this is years of it.
MAX_TRIALS = 100_000
# A seed: below 2**32, what NumPy's legacy generator (Optuna's samplers) accepts.
MAX_SEED = (1 << 32) - 1
# How many times faster than real time the simulator runs: its timers would be finer than
# the event loop's resolution long before this.
MAX_TIME_SCALE = 1e6
# Attention heads of a model: above every architecture's.
MAX_HEADS = 1 << 16
# A trace file's bytes: every record is held while a run is built, so this bounds a
# worker's memory for the largest file accepted (hash ids included; tests/integration/
# test_trace_memory.py reads its peak); the public Mooncake and Azure traces are smaller.
MAX_TRACE_BYTES = 1 << 25
# One line of a trace: the record of a prompt of MAX_TOKENS tokens fits, with a hash id of
# twenty digits for each of its blocks (tuner.loadgen.replay.PREFIX_BLOCK_TOKENS).
MAX_TRACE_LINE_BYTES = 1 << 20
# A trace's arrivals span at most as long as any run may last (MAX_DURATION_S), so that a
# replay at speed-up 1 fits a run; a span of years is a timestamp in the wrong unit.
MAX_TRACE_SPAN_S = MAX_DURATION_S
# A Mooncake timestamp in milliseconds: below 2**53, where a float still holds every whole
# number (past it the offsets would not be the recorded ones).
MAX_TIMESTAMP_MS = 1 << 53
