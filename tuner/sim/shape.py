"""The model's shape, read from its config.json: what the memory and time models need."""

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

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.torch_dtype, 2)

    def layer_params(self) -> int:
        """Weights of one decoder layer: attention projections, gated MLP, two norms."""
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        attention = h * h * 2 + h * kv * 2
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
_FIELDS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
           "vocab_size", "max_position_embeddings")


def shape_from_config(config: dict) -> ModelShape:
    """A ModelShape from a parsed config.json; UsageError naming the missing key."""
    missing = [k for k in _FIELDS if k not in config]
    if missing:
        raise UsageError(f"config.json lacks {', '.join(missing)}: not a Llama-style model config")
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
    )


def load_shape(model_dir: str | Path) -> ModelShape:
    """Read ``MODEL_DIR/config.json``; UsageError if absent or not JSON."""
    path = Path(model_dir) / "config.json"
    try:
        return shape_from_config(json.loads(path.read_text()))
    except FileNotFoundError as e:
        raise UsageError(f"{path} not found: --model must be a folder with a config.json") from e
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not valid JSON: {e}") from e
