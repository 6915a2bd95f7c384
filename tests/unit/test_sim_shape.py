"""Which config.json the simulator models: Llama-style dense decoders (Llama, Qwen2,
Mistral) and their differences; every other architecture is refused in one line."""

from __future__ import annotations

import pytest

from tuner.errors import UsageError
from tuner.sim.shape import shape_from_config

pytestmark = pytest.mark.unit

# Qwen2.5-7B-Instruct's config.json, as the hub serves it (the keys the simulator reads).
QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
             "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
             "num_attention_heads": 28, "num_key_value_heads": 4,
             "max_position_embeddings": 32768, "vocab_size": 152064,
             "sliding_window": 131072, "use_sliding_window": False,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
# Mistral-Nemo-Base-2407: a head_dim (128) that is not hidden_size / heads (160).
MISTRAL_NEMO = {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
                "hidden_size": 5120, "intermediate_size": 14336, "num_hidden_layers": 40,
                "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                "max_position_embeddings": 1024000, "vocab_size": 131072,
                "sliding_window": None, "torch_dtype": "bfloat16"}


def _as(arch: str, **keys) -> dict:
    return {**QWEN25_7B, "architectures": [arch], **keys}


@pytest.mark.parametrize("arch", ["MixtralForCausalLM", "Qwen2MoeForCausalLM",
                                  "DeepseekV3ForCausalLM", "GPT2LMHeadModel"])
def test_an_architecture_it_does_not_model_is_refused_in_one_line(arch):
    with pytest.raises(UsageError) as e:
        shape_from_config(_as(arch, num_local_experts=8))
    message = str(e.value)
    assert "\n" not in message
    assert arch in message and "LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM" in message


def test_a_config_that_names_no_architecture_is_refused():
    config = {k: v for k, v in QWEN25_7B.items() if k != "architectures"}
    with pytest.raises(UsageError, match="architecture none is not one the simulator models"):
        shape_from_config(config)


def test_qwen2_is_llamas_layer_with_a_bias_on_q_k_and_v():
    qwen = shape_from_config(QWEN25_7B)
    llama = shape_from_config(_as("LlamaForCausalLM"))
    q, kv = 28 * 128, 4 * 128
    assert qwen.layer_params() - llama.layer_params() == q + 2 * kv
    assert qwen.kv_bytes_per_token() == llama.kv_bytes_per_token() == 2 * 28 * 4 * 128 * 2


def test_llamas_attention_bias_also_biases_the_output_projection():
    plain = shape_from_config(_as("LlamaForCausalLM"))
    biased = shape_from_config(_as("LlamaForCausalLM", attention_bias=True))
    assert biased.layer_params() - plain.layer_params() == 28 * 128 + 2 * 4 * 128 + 3584


def test_a_head_dim_of_its_own_sizes_attention_and_the_kv_cache():
    nemo = shape_from_config(MISTRAL_NEMO)
    assert nemo.head_dim == 128 and nemo.q_size == 4096
    assert nemo.kv_bytes_per_token() == 2 * 40 * 8 * 128 * 2
    h = 5120
    assert nemo.layer_params() == 2 * h * 4096 + 2 * h * 1024 + 3 * h * 14336 + 2 * h


def test_mistrals_sliding_window_shorter_than_its_context_is_refused():
    v01 = {**MISTRAL_NEMO, "head_dim": None, "hidden_size": 4096,
           "max_position_embeddings": 32768, "sliding_window": 4096}
    with pytest.raises(UsageError, match="sliding window of 4096 tokens.*set sliding_window"):
        shape_from_config(v01)
    assert shape_from_config({**v01, "sliding_window": None}).head_dim == 128
    assert shape_from_config({**v01, "sliding_window": 32768}).head_dim == 128


def test_qwen2s_window_counts_only_where_the_config_uses_it():
    assert shape_from_config(QWEN25_7B).num_hidden_layers == 28
    with pytest.raises(UsageError, match="sliding window of 4096 tokens"):
        shape_from_config({**QWEN25_7B, "sliding_window": 4096, "use_sliding_window": True})


def test_quantised_weights_are_refused():
    with pytest.raises(UsageError, match="quantization_config.*unquantised weights only"):
        shape_from_config({**QWEN25_7B, "quantization_config": {"quant_method": "awq"}})
