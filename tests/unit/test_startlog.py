"""Start phases from vLLM 0.24's log, on excerpts of the H200 study's real logs
(../shared/h200-2026-12-01/logs: trial 9 compiled a new budget, trial 7 hit the compile cache,
trial 1 started eager). Lines are cut where marked with '...'."""

from tuner.engine.startlog import start_phases

MISS = """\
$ /opt/torch/.venv/bin/python3 -m vllm.entrypoints.openai.api_server --model /tmp/llama3-8b-dummy ...
(APIServer pid=4541) INFO 12-01 08:54:37 [api_utils.py:339]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.24.0
(EngineCore pid=4606) INFO 12-01 08:54:58 [core.py:114] Initializing a V1 LLM engine (v0.24.0) with config: model='/tmp/llama3-8b-dumm...
(EngineCore pid=4606) INFO 12-01 08:55:01 [model_runner.py:302] Model loading took 14.99 GiB and 1.922802 seconds
(EngineCore pid=4606) INFO 12-01 08:55:14 [backends.py:378] Cache the graph of compile range (1, 2896) for later use
(EngineCore pid=4606) INFO 12-01 08:55:19 [backends.py:393] Compiling a graph for compile range (1, 2896) takes 9.63 s
(EngineCore pid=4606) INFO 12-01 08:55:25 [decorators.py:708] saved AOT compiled function to /root/.cache/vllm/torch_compil...
(EngineCore pid=4606) INFO 12-01 08:55:25 [monitor.py:53] torch.compile took 23.56 s in total
(EngineCore pid=4606) INFO 12-01 08:55:26 [monitor.py:81] Initial profiling/warmup run took 0.31 s
(EngineCore pid=4606) INFO 12-01 08:55:28 [kv_cache_utils.py:2146] GPU KV cache size: 1,841,200 tokens
(EngineCore pid=4606) Capturing CUDA graphs (PIECEWISE):   0%|          | 0/51 [00:00<?, ?it/s]Capturing CUDA graphs (PIECEWISE):   4%|
(EngineCore pid=4606) INFO 12-01 08:55:34 [model_runner.py:726] Graph capturing finished in 6 secs, took 0.97 GiB
(EngineCore pid=4606) INFO 12-01 08:55:49 [jit_monitor.py:60] Kernel JIT monitor activated
(EngineCore pid=4606) INFO 12-01 08:55:49 [core.py:337] init engine (profile, create kv cache, warmup model) took 47.98 s (compilation: 23.56 s)
(APIServer pid=4541) INFO 12-01 08:55:50 [api_server.py:581] Starting vLLM server on http://127.0.0.1:35669
(APIServer pid=4541) INFO:     Started server process [4541]
(APIServer pid=4541) INFO:     Application startup complete.
(APIServer pid=4541) INFO 12-01 08:56:00 [loggers.py:273] Engine 000: Avg prompt throughput: 21204.4 tokens/s
"""

HIT = """\
(APIServer pid=3855) INFO 12-01 08:50:54 [api_utils.py:339]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.24.0
(EngineCore pid=3920) INFO 12-01 08:51:15 [core.py:114] Initializing a V1 LLM engine (v0.24.0) with config: model='/tmp/llama3-8b-dumm...
(EngineCore pid=3920) INFO 12-01 08:51:19 [model_runner.py:302] Model loading took 14.99 GiB and 1.967435 seconds
(EngineCore pid=3920) INFO 12-01 08:51:22 [backends.py:1089] Using cache directory: /root/.cache/vllm/torch_compile_cache/6e...
(EngineCore pid=3920) INFO 12-01 08:51:22 [backends.py:1148] Dynamo bytecode transform time: 3.10 s
(EngineCore pid=3920) INFO 12-01 08:51:24 [backends.py:292] Directly load the compiled graph(s) for compile range (1, 2048) from the cache, took 1.311 s
(EngineCore pid=3920) INFO 12-01 08:51:24 [decorators.py:311] Directly load AOT compilation from path /root/.cache/vllm/torch_compil...
(EngineCore pid=3920) INFO 12-01 08:51:24 [monitor.py:53] torch.compile took 4.71 s in total
(EngineCore pid=3920) INFO 12-01 08:51:24 [monitor.py:81] Initial profiling/warmup run took 0.11 s
(EngineCore pid=3920) INFO 12-01 08:51:25 [kv_cache_utils.py:2146] GPU KV cache size: 1,844,992 tokens
(EngineCore pid=3920) INFO 12-01 08:51:31 [model_runner.py:726] Graph capturing finished in 6 secs, took 0.97 GiB
(EngineCore pid=3920) INFO 12-01 08:51:31 [jit_monitor.py:60] Kernel JIT monitor activated
(EngineCore pid=3920) INFO 12-01 08:51:32 [core.py:337] init engine (profile, create kv cache, warmup model) took 12.86 s (compilation: 4.71 s)
(APIServer pid=3855) INFO 12-01 08:51:33 [api_server.py:581] Starting vLLM server on http://127.0.0.1:51493
(APIServer pid=3855) INFO:     Application startup complete.
"""

EAGER = """\
(APIServer pid=1328) INFO 12-01 08:36:15 [api_utils.py:339]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.24.0
(APIServer pid=1328) WARNING 12-01 08:36:15 [vllm.py:1062] Enforce eager set, disabling torch.compile and CUDAGraphs.
(EngineCore pid=1397) INFO 12-01 08:36:38 [core.py:114] Initializing a V1 LLM engine (v0.24.0) with config: model='/tmp/llama3-8b-dumm...
(EngineCore pid=1397) INFO 12-01 08:36:42 [model_runner.py:302] Model loading took 14.96 GiB and 1.518581 seconds
(EngineCore pid=1397) INFO 12-01 08:36:44 [kv_cache_utils.py:2146] GPU KV cache size: 956,976 tokens
(EngineCore pid=1397) INFO 12-01 08:37:00 [jit_monitor.py:60] Kernel JIT monitor activated
(EngineCore pid=1397) INFO 12-01 08:37:01 [core.py:344] init engine (profile, create kv cache, warmup model) took 18.99 s
(APIServer pid=1328) INFO 12-01 08:37:02 [api_server.py:581] Starting vLLM server on http://127.0.0.1:52743
(APIServer pid=1328) INFO:     Application startup complete.
"""


def test_a_new_budget_compiles_and_warms_up():
    p = start_phases(MISS)
    assert p["compile_cache"] == "miss" and p["compile_range"] == "1-2896"
    assert p["compile"] == 23.56 and p["weights"] == 1.922802
    assert p["api_start"] == 21 and p["engine_start"] == 3
    assert p["kv_profile"] == 2.31 and p["graph_capture"] == 6.0
    assert p["warmup"] == 15 and p["init_engine"] == 47.98
    assert p["api_ready"] == 1 and p["logged"] == 73


def test_a_seen_budget_loads_from_the_compile_cache():
    p = start_phases(HIT)
    assert p["compile_cache"] == "hit" and p["compile_range"] == "1-2048"
    assert p["compile"] == 4.71 and p["warmup"] == 1 and p["init_engine"] == 12.86
    assert p["logged"] == 39


def test_an_eager_start_has_no_compile_phase():
    p = start_phases(EAGER)
    assert "compile" not in p and "compile_cache" not in p and "graph_capture" not in p
    assert p["api_start"] == 23 and p["warmup"] == 17 and p["init_engine"] == 18.99


def test_a_log_without_vllm_lines_gives_no_phases():
    assert start_phases("stand-in pid starting: healthy\nGPU KV cache size: 12,345 tokens\n") == {}
    assert start_phases("") == {}


def test_process_start_is_the_measured_start_less_what_the_log_covers():
    from tuner.engine.startlog import with_process_start

    p = with_process_start(start_phases(HIT), 58.4)
    assert p["process_start"] == 19.4  # 58.4 s measured, 39 s between the log's stamps
    assert with_process_start({}, 58.4) == {}
