"""The model's shape, read from its config.json: what the memory and time models need.

The model covers dense decoders built of Llama's layer: RMSNorm, rotary attention with
grouped KV heads, a gated SiLU MLP (:data:`MODELLED`). Qwen2's layer is Llama's with a bias
on the q, k and v projections (counted in the weights); Mistral's is Llama's, with a
sliding window where its config sets one. A config of another architecture (a mixture of
experts such as Mixtral, Qwen2-MoE or DeepSeek-V3), with quantised weights, or with a
sliding window that a request can outgrow is refused: :func:`shape_from_config` raises a
one-line UsageError rather than price it as the dense model it is not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import UsageError

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "half": 2}
KV_DTYPE_BYTES = {"auto": None, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer (Llama family) as config.json describes it."""

    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    torch_dtype: str = "bfloat16"
    tie_word_embeddings: bool = False
    attention_head_dim: int = 0  # config.json's head_dim; 0: hidden_size / heads
    qkv_bias: bool = False  # Qwen2's, or Llama's attention_bias (which also biases o)
    o_bias: bool = False

    @property
    def head_dim(self) -> int:
        return self.attention_head_dim or self.hidden_size // self.num_attention_heads

    @property
    def q_size(self) -> int:
        """Width of the query projection: every head's."""
        return self.num_attention_heads * self.head_dim

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.torch_dtype, 2)

    def layer_params(self) -> int:
        """Weights of one decoder layer: attention projections (and their biases), gated
        MLP, two norms."""
        h, q, kv = self.hidden_size, self.q_size, self.num_key_value_heads * self.head_dim
        attention = h * q * 2 + h * kv * 2
        attention += (q + 2 * kv if self.qkv_bias else 0) + (h if self.o_bias else 0)
        return attention + 3 * h * self.intermediate_size + 2 * h

    def num_params(self) -> int:
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * self.layer_params() + embeddings + self.hidden_size

    def weight_bytes(self, tp: int = 1, dtype_bytes: int | None = None) -> int:
        """Bytes of weights on one GPU (every matrix split over ``tp`` ranks)."""
        return self.num_params() * (dtype_bytes or self.dtype_bytes) // tp

    def kv_heads_per_rank(self, tp: int) -> int:
        return max(1, self.num_key_value_heads // tp)

    def kv_bytes_per_token(self, tp: int = 1, kv_cache_dtype: str = "auto") -> int:
        """KV-cache bytes of one token on one GPU: K and V of every layer."""
        elem = KV_DTYPE_BYTES.get(kv_cache_dtype) or self.dtype_bytes
        return 2 * self.num_hidden_layers * self.kv_heads_per_rank(tp) * self.head_dim * elem


LLAMA3_8B = ModelShape(32, 4096, 32, 8, 14336, 128256, 8192, "bfloat16")
# The architectures the model covers, with their config.json model_type.
MODELLED = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
            "MistralForCausalLM": "mistral"}
_FIELDS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
           "vocab_size", "max_position_embeddings")
_SEE = "docs/simulator.md, Limits"


def modelled_architecture(config: dict) -> str:
    """The config's architecture if the model covers it; UsageError (one line) otherwise:
    another architecture, quantised weights, or a sliding window shorter than the context."""
    archs = config.get("architectures") or []
    arch = archs[0] if len(archs) == 1 else None
    if arch not in MODELLED:
        named = ", ".join(map(str, archs)) or "none"
        raise UsageError(f"architecture {named} is not one the simulator models: it "
                         f"models the dense decoders {', '.join(MODELLED)} only ({_SEE})")
    if config.get("quantization_config"):
        raise UsageError(f"a quantization_config: the simulator models {arch} with "
                         f"unquantised weights only ({_SEE})")
    window = _sliding_window(arch, config)
    if window is not None:
        raise UsageError(f"a sliding window of {window} tokens, shorter than the "
                         f"{config.get('max_position_embeddings')} positions: the simulator "
                         f"models full attention only; set sliding_window to null ({_SEE})")
    return arch


def _sliding_window(arch: str, config: dict) -> int | None:
    """The attention window a request can outgrow, None if attention is full. Qwen2 uses
    its ``sliding_window`` only with ``use_sliding_window``."""
    window = config.get("sliding_window")
    if window is None or (arch == "Qwen2ForCausalLM" and not config.get("use_sliding_window")):
        return None
    if int(window) >= int(config.get("max_position_embeddings") or 0):
        return None
    return int(window)


def shape_from_config(config: dict) -> ModelShape:
    """A ModelShape from a parsed config.json; UsageError (one line, which the caller
    prefixes with where the config came from) naming the missing key, or the architecture
    or feature the model does not cover (:func:`modelled_architecture`)."""
    arch = modelled_architecture(config)
    missing = [k for k in _FIELDS if k not in config]
    if missing:
        raise UsageError(f"no {', '.join(missing)}: not a complete {arch} config")
    bias = arch == "Qwen2ForCausalLM" or bool(config.get("attention_bias", False))
    return ModelShape(
        num_hidden_layers=int(config["num_hidden_layers"]),
        hidden_size=int(config["hidden_size"]),
        num_attention_heads=int(config["num_attention_heads"]),
        num_key_value_heads=int(config.get("num_key_value_heads", config["num_attention_heads"])),
        intermediate_size=int(config["intermediate_size"]),
        vocab_size=int(config["vocab_size"]),
        max_position_embeddings=int(config["max_position_embeddings"]),
        torch_dtype=str(config.get("torch_dtype", config.get("dtype", "bfloat16"))),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        attention_head_dim=int(config.get("head_dim") or 0),
        qkv_bias=bias,
        o_bias=bias and arch != "Qwen2ForCausalLM",
    )


def load_shape(model_dir: str | Path) -> ModelShape:
    """Read ``MODEL_DIR/config.json``; UsageError if absent, not a JSON object, or not a
    model the simulator covers (:func:`shape_from_config`)."""
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise UsageError(f"{path} not found: --model must be a folder with a config.json") from e
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(config, dict):
        raise UsageError(f"{path} is not a model config: a JSON object was expected")
    try:
        return shape_from_config(config)
    except UsageError as e:
        raise UsageError(f"{path}: {e}") from None
