"""The load generator: workloads, arrival schedules, one streaming client, exact metrics.

    from tuner.loadgen import WorkloadSpec, LoadSpec, SLO, BenchmarkResult, run_benchmark
    result = await run_benchmark(url, model, WorkloadSpec(...), LoadSpec(...), slo=SLO(...))

Metrics are defined as vLLM's serving benchmark (``vllm/benchmarks/serve.py``) so numbers
compare; see docs/loadgen.md.
"""

from tuner.loadgen.benchmark import BenchmarkResult, fetch_model, run_benchmark
from tuner.loadgen.client import RequestOutput
from tuner.loadgen.metrics import calculate_metrics, to_simulated_time
from tuner.loadgen.spec import SLO, LoadSpec, WorkloadSpec

__all__ = [
    "SLO",
    "BenchmarkResult",
    "LoadSpec",
    "RequestOutput",
    "WorkloadSpec",
    "calculate_metrics",
    "fetch_model",
    "run_benchmark",
    "to_simulated_time",
]
