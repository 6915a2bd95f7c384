"""Reading the server's view from Prometheus text (no I/O)."""

from __future__ import annotations

import pytest

from tuner.loadgen.lag import judge, lag_stats
from tuner.loadgen.prometheus import GaugePoller, parse_metrics, server_view

pytestmark = pytest.mark.unit

PAGE = """# HELP vllm:num_preemptions_total Cumulative number of preemptions.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
vllm:num_preemptions_total{engine="1",model_name="m"} 2.0
vllm:prefix_cache_queries_total{engine="0",model_name="a b"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.42
vllm:num_requests_running{engine="0",model_name="m"} 7.0
vllm:prefix_cache_hits_created 1.7e9
python_gc_objects_collected_total{generation="0"} 12.0
"""


def test_parse_sums_wanted_metrics_over_label_sets():
    assert parse_metrics(PAGE) == {
        "vllm:num_preemptions_total": 5.0,
        "vllm:prefix_cache_queries_total": 1000.0,
        "vllm:prefix_cache_hits_total": 250.0,
        "vllm:kv_cache_usage_perc": 0.42,
        "vllm:num_requests_running": 7.0,
    }
    assert parse_metrics("vllm:kv_cache_usage_perc 0.5\n") == {"vllm:kv_cache_usage_perc": 0.5}


def test_server_view_reports_deltas_and_leaves_absent_metrics_out():
    before = parse_metrics(PAGE)
    after = dict(before, **{"vllm:num_preemptions_total": 9.0,
                            "vllm:prefix_cache_hits_total": 300.0})
    del after["vllm:prefix_cache_queries_total"]
    peaks = {"vllm:kv_cache_usage_perc": 0.9, "vllm:num_requests_running": 12.0}
    assert server_view(before, after, peaks) == {"preemptions": 4.0, "prefix_cache_hits": 50.0,
                                                 "kv_cache_usage_peak": 0.9,
                                                 "running_peak": 12.0}
    assert server_view(None, None, None) == {}


def test_the_poller_keeps_each_gauges_peak():
    poller = GaugePoller(None, "http://127.0.0.1:1", 1.0)  # type: ignore[arg-type]
    for page in (PAGE, PAGE.replace("} 7.0", "} 31.0").replace("0.42", "0.2"), None,
                 "vllm:num_requests_running 3\n"):
        poller.observe(parse_metrics(page) if page else None)
    assert poller.peaks == {"vllm:kv_cache_usage_perc": 0.42, "vllm:num_requests_running": 31.0}


def test_lag_judgement():
    stats = lag_stats("loop_lag", [0.001] * 98 + [0.02, 0.03])
    assert stats["loop_lag_max_ms"] == pytest.approx(30.0)
    assert judge(stats, 5.0) is not None and "loop_lag_p99_ms" in judge(stats, 5.0)
    assert judge(lag_stats("loop_lag", [0.001] * 100), 5.0) is None
    busy = dict(stats, cpu_util_max=0.97)
    idle = dict(stats, cpu_util_max=0.05)
    assert "bottleneck" in judge(busy, 5.0) and "starved" in judge(idle, 5.0)
    # a starved client is told of real-time scheduling, unless it already ran so
    assert 'client_priority = "realtime"' in judge(idle, 5.0)
    assert "client_priority" not in judge(dict(idle, realtime_processes=1), 5.0)
    assert "client_priority" not in judge(busy, 5.0)
    assert lag_stats("x", []) == {}
