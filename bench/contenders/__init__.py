"""Samplers and plans kept only to compare against the default in ``bench/search.py``: the
previous default (``local``: pattern moves around vLLM's defaults, with TPE) and the
search plans each contender runs (``plan``). None of it ships in ``tuner``."""
