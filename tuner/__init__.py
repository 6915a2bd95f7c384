"""tuner: a Bayesian-optimisation service for vLLM engine flags."""

__version__ = "0.1.0"
