"""`tuner model make` from a Hugging Face config.json or its dimensions, and the simulated
engine's answer to an architecture it does not model: the real `tuner` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.testing.cli_fork import run_tuner

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

# Qwen2.5-7B-Instruct's config.json as the hub serves it.
QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
             "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu",
             "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944,
             "max_position_embeddings": 32768, "max_window_layers": 28, "model_type": "qwen2",
             "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
             "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16",
             "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False,
             "vocab_size": 152064}
MIXTRAL = {**QWEN25_7B, "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
           "num_local_experts": 8, "num_experts_per_tok": 2}


def _config(folder, config):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder / "config.json"


def _kv_cache_tokens(model_dir, out) -> int:
    """The simulator's KV-cache tokens for the folder on an H200 at one set of flags
    (`tuner sim grid`, offline)."""
    axes = ["max_num_batched_tokens=2048", "max_model_len=4096", "gpu_memory_utilization=0.9",
            "enable_prefix_caching=false", "enable_chunked_prefill=true",
            "enforce_eager=false", "max_num_seqs=64"]
    done = run_tuner(["sim", "grid", "--model", model_dir, "--gpu", "h200", "--concurrency",
                      "4", "--num-requests", "8", "--input-len", "64", "--output-len", "8",
                      "--processes", "1", *[w for a in axes for w in ("--axis", a)],
                      "--out", out], timeout=120)
    assert done.returncode == 0, done.stderr
    [outcome] = json.loads(out.read_text())["outcomes"]
    assert outcome["started"], outcome["failure_message"]
    return outcome["kv_cache_tokens"]


def test_model_make_writes_a_qwen2_folder_from_its_config_json(tmp_path):
    source = _config(tmp_path / "hub", QWEN25_7B)
    done = run_tuner(["model", "make", tmp_path / "qwen", "--config", source], timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "qwen")
    assert "Qwen2ForCausalLM: 28 layers, hidden 3584, vocab 152064" in done.stderr
    config = json.loads((tmp_path / "qwen" / "config.json").read_text())
    assert (config["architectures"], config["model_type"]) == (["Qwen2ForCausalLM"], "qwen2")
    assert config["num_key_value_heads"] == 4 and config["rope_theta"] == 1e6
    assert (config["bos_token_id"], config["eos_token_id"]) == (151808, 151809)
    assert {p.name for p in (tmp_path / "qwen").iterdir()} == {
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json"}
    # a folder holding the config.json serves as well as the file
    again = run_tuner(["model", "make", tmp_path / "again", "--config", tmp_path / "hub"],
                      timeout=120)
    assert again.returncode == 0, again.stderr


def test_model_make_takes_a_models_dimensions(tmp_path):
    done = run_tuner(["model", "make", tmp_path / "m", "--shape", "tiny",
                      "--set", "architectures=MistralForCausalLM",
                      "--set", "num_hidden_layers=4", "--set", "head_dim=64",
                      "--set", "sliding_window=null"], timeout=120)
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert (config["architectures"], config["model_type"]) == (["MistralForCausalLM"],
                                                               "mistral")
    assert (config["num_hidden_layers"], config["head_dim"]) == (4, 64)
    assert config["sliding_window"] is None


def test_model_make_names_a_mistyped_key(tmp_path):
    done = run_tuner(["model", "make", tmp_path / "m", "--set", "num_layers=4"], timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "tuner: error: --set 'num_layers=4': config.json has no key 'num_layers'; did you "
        "mean 'num_hidden_layers'?"]
    assert not (tmp_path / "m").exists()


def test_model_make_refuses_a_mixture_of_experts(tmp_path):
    source = _config(tmp_path / "hub", MIXTRAL)
    done = run_tuner(["model", "make", tmp_path / "m", "--config", source], timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "architecture MixtralForCausalLM is not one the simulator models" in line
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("arch", ["MixtralForCausalLM", "Qwen2MoeForCausalLM",
                                  "DeepseekV3ForCausalLM"])
def test_the_simulator_refuses_an_architecture_it_does_not_model(tmp_path, arch):
    _config(tmp_path / "moe", {**MIXTRAL, "architectures": [arch]})
    done = run_tuner(["sim", "serve", "--model", tmp_path / "moe", "--gpu", "h200",
                      "--port", "1"], timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line == (f"tuner: error: {tmp_path / 'moe' / 'config.json'}: architecture {arch} "
                    "is not one the simulator models: it models the dense decoders "
                    "LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM only "
                    "(docs/simulator.md, Limits)")
    assert done.stdout == ""


def test_the_simulator_serves_a_qwen2_folder_with_qwen2s_kv_cache(tmp_path):
    """Qwen2.5-7B keeps 4 KV heads of 28 layers a token, against Llama-3-8B's 8 of 32, and
    its weights are smaller: more than twice the KV-cache tokens on the same H200."""
    source = _config(tmp_path / "hub", QWEN25_7B)
    made = run_tuner(["model", "make", tmp_path / "qwen", "--config", source], timeout=120)
    assert made.returncode == 0, made.stderr
    llama = run_tuner(["model", "make", tmp_path / "llama", "--shape", "8b"], timeout=120)
    assert llama.returncode == 0, llama.stderr
    qwen_tokens = _kv_cache_tokens(tmp_path / "qwen", tmp_path / "qwen.json")
    llama_tokens = _kv_cache_tokens(tmp_path / "llama", tmp_path / "llama.json")
    assert qwen_tokens > 2 * llama_tokens


def test_a_study_on_the_simulator_refuses_a_mixture_of_experts_at_creation(tmp_path):
    _config(tmp_path / "models" / "mixtral", MIXTRAL)
    study = (ROOT / "studies" / "capacity-sim.toml").read_text().replace(
        'path = "models/llama3-8b"', 'path = "models/mixtral"')
    (tmp_path / "moe-sim.toml").write_text(study)
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    done = run_tuner(["study", "create", tmp_path / "moe-sim.toml", "--storage", db],
                     timeout=120)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"tuner: error: {tmp_path / 'moe-sim.toml'}: key 'model.path': ")
    assert "architecture MixtralForCausalLM is not one the simulator models" in line
    listed = run_tuner(["study", "list", "--storage", db], timeout=120)
    assert "moe-sim" not in listed.stdout
