"""Model folders that vLLM serves with ``--load-format dummy``, written by our own code.

A folder holds ``config.json`` (a ``LlamaForCausalLM`` config), ``generation_config.json``
and a tokenizer (``tokenizer.json``, ``tokenizer_config.json`` with a Llama-3 chat
template, ``special_tokens_map.json``). No weights: vLLM fills them with random numbers, so
speed and memory are those of the real shape and the generated text is gibberish.

Shapes (:data:`SHAPES`):

- ``tiny``: 2 layers, hidden 128, 4 heads (4 KV heads), intermediate 256, vocabulary 1024,
  4096 positions. vLLM's CPU build serves it in seconds: the end-to-end tests use it.
- ``8b`` / ``70b``: Meta-Llama-3-8B / -70B dimensions with the full 128,256-entry
  vocabulary. Token ids match ``make_model.py`` of the offline GPU kit, so the same token
  ids mean the same text on either folder.

Or any Hugging Face ``config.json`` (a Llama, Qwen2 or Mistral one: which ones the simulator
models is ``tuner.sim.shape``'s to say, and ``tuner model make`` asks it first): the folder
keeps that config as it is, architecture and dimensions included, except its token ids,
which become this tokenizer's (:func:`config_for_folder`).

The tokenizer is a word-level vocabulary built deterministically with the ``tokenizers``
library (no hub, no training data): ``<unk>`` at id 0, the 94 printable ASCII characters,
then lowercase letter strings (``aa``, ``ab``, ..., ``aaa``, ...), and the special tokens at
the top ids (``<|begin_of_text|>`` first). Every regular token is one pre-token under the
``Whitespace`` pre-tokenizer, so decoding any sequence of regular ids and encoding the text
again gives back the same ids.
"""

from __future__ import annotations

import itertools
import json
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

BOS, EOS, UNK = "<|begin_of_text|>", "<|end_of_text|>", "<unk>"
EOT = "<|eot_id|>"
# Named special tokens by offset from the first special id, as in Meta-Llama-3.
_NAMED_SPECIALS = {0: BOS, 1: EOS, 6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: EOT}

# What config_shape reads of a config.json.
_CONFIG_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "vocab_size", "max_position_embeddings")

# Llama-3-Instruct chat template, so that /v1/chat/completions works as well.
CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)


@dataclass(frozen=True)
class ModelShape:
    """The dimensions of a Llama model and the size of its tokenizer."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    rope_theta: float
    num_special_tokens: int

    @property
    def bos_token_id(self) -> int:
        return self.vocab_size - self.num_special_tokens

    @property
    def eos_token_id(self) -> int:
        return self.bos_token_id + 1


SHAPES: dict[str, ModelShape] = {
    "tiny": ModelShape("tiny", 128, 2, 4, 4, 256, 1024, 4096, 10000.0, 16),
    "8b": ModelShape("8b", 4096, 32, 32, 8, 14336, 128256, 8192, 500000.0, 256),
    "70b": ModelShape("70b", 8192, 80, 64, 8, 28672, 128256, 8192, 500000.0, 256),
}


def get_shape(name: str) -> ModelShape:
    """The shape called ``name``; ValueError naming the known shapes otherwise."""
    try:
        return SHAPES[name]
    except KeyError:
        raise ValueError(f"unknown model shape {name!r}; choose one of {sorted(SHAPES)}") from None


def config_shape(config: Mapping[str, Any]) -> ModelShape:
    """The dimensions of a Hugging Face ``config.json``, with the tokenizer's size: its
    vocabulary, 256 special tokens (16 for a vocabulary of 8192 or fewer). ValueError
    naming a missing key."""
    missing = [k for k in _CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"config.json lacks {', '.join(missing)}")
    vocab = int(config["vocab_size"])
    heads = int(config["num_attention_heads"])
    return ModelShape(
        str(config.get("model_type", "config")), int(config["hidden_size"]),
        int(config["num_hidden_layers"]), heads, int(config.get("num_key_value_heads", heads)),
        int(config["intermediate_size"]), vocab, int(config["max_position_embeddings"]),
        float(config.get("rope_theta", 10000.0)), 256 if vocab > 8192 else 16)


def config_for_folder(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the token ids of the folder's tokenizer (BOS and EOS at the top of
    its vocabulary), every other key as given."""
    shape = config_shape(config)
    return {**config, "bos_token_id": shape.bos_token_id, "eos_token_id": shape.eos_token_id}


def llama_config(shape: ModelShape) -> dict[str, Any]:
    """The ``config.json`` contents of a ``LlamaForCausalLM`` of this shape (bfloat16)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": shape.bos_token_id,
        "eos_token_id": shape.eos_token_id,
        "hidden_act": "silu",
        "hidden_size": shape.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": shape.intermediate_size,
        "max_position_embeddings": shape.max_position_embeddings,
        "model_type": "llama",
        "num_attention_heads": shape.num_attention_heads,
        "num_hidden_layers": shape.num_hidden_layers,
        "num_key_value_heads": shape.num_key_value_heads,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": shape.rope_theta,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.40.0.dev0",
        "use_cache": True,
        "vocab_size": shape.vocab_size,
    }


def special_tokens(count: int) -> list[str]:
    """``count`` special tokens in id order, named as Meta-Llama-3's 256 are."""
    if count <= max(_NAMED_SPECIALS):
        raise ValueError(f"need more than {max(_NAMED_SPECIALS)} special tokens, got {count}")
    reserved = (f"<|reserved_special_token_{i}|>" for i in itertools.count())
    return [_NAMED_SPECIALS.get(i) or next(reserved) for i in range(count)]


def regular_tokens(count: int) -> list[str]:
    """``<unk>``, the printable ASCII characters, then lowercase strings of 2, 3, 4 letters."""
    letters = string.ascii_lowercase
    words = itertools.chain.from_iterable(
        ("".join(p) for p in itertools.product(letters, repeat=n)) for n in (2, 3, 4)
    )
    tokens = [UNK] + [chr(c) for c in range(0x21, 0x7F)]
    tokens += itertools.islice(words, count - len(tokens))
    if len(tokens) != count:
        raise ValueError(f"cannot make {count} regular tokens (at most {len(tokens)})")
    return tokens


def build_tokenizer(shape: ModelShape):
    """A ``tokenizers.Tokenizer`` with exactly ``shape.vocab_size`` entries."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

    specials = special_tokens(shape.num_special_tokens)
    tokens = regular_tokens(shape.vocab_size - len(specials)) + specials
    vocab = {token: i for i, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    # add_special_tokens keeps the ids the tokens already have in the vocabulary
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in [UNK, *specials]]
    )
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS}:0 $A:0",
        pair=f"{BOS}:0 $A:0 {BOS}:1 $B:1",
        special_tokens=[(BOS, vocab[BOS])],
    )
    return tokenizer


def _tokenizer_config(shape: ModelShape, tokenizer) -> dict[str, Any]:
    special = [UNK, *special_tokens(shape.num_special_tokens)]
    added = {
        str(tokenizer.token_to_id(t)): {
            "content": t, "lstrip": False, "normalized": False,
            "rstrip": False, "single_word": False, "special": True,
        }
        for t in special
    }
    return {
        "added_tokens_decoder": added,
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": UNK,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": shape.max_position_embeddings,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def write_model_folder(path: str | Path, shape: str | ModelShape | Mapping[str, Any]) -> Path:
    """Write the model folder of ``shape``: a name in :data:`SHAPES`, a ModelShape (a Llama
    config), or a Hugging Face config.json's contents (:func:`config_for_folder`).

    Creates ``path`` if needed and overwrites the files it writes; the bytes depend only on
    the shape. Returns ``path`` as a Path.
    """
    if isinstance(shape, str):
        shape = get_shape(shape)
    if isinstance(shape, ModelShape):
        config = llama_config(shape)
    else:
        config = config_for_folder(shape)
        shape = config_shape(config)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(shape)
    tokenizer.save(str(out / "tokenizer.json"))
    files = {
        "config.json": config,
        "generation_config.json": {
            "_from_model_config": True,
            "bos_token_id": shape.bos_token_id,
            "eos_token_id": shape.eos_token_id,
            "transformers_version": "4.40.0.dev0",
        },
        "tokenizer_config.json": _tokenizer_config(shape, tokenizer),
        "special_tokens_map.json": {"bos_token": BOS, "eos_token": EOS, "unk_token": UNK},
    }
    for name, content in files.items():
        (out / name).write_text(json.dumps(content, indent=2) + "\n")
    return out


def write_tiny_llama(path: str | Path) -> Path:
    """Write the ``tiny`` Llama folder (vocabulary 1024) that the vLLM CPU build serves."""
    return write_model_folder(path, "tiny")


def write_llama_shape(path: str | Path, shape: str = "8b") -> Path:
    """Write a Llama-3-8B (``"8b"``) or -70B (``"70b"``) shaped folder, 128,256 tokens."""
    if shape not in ("8b", "70b"):
        raise ValueError(f"unknown Llama-3 shape {shape!r}; choose '8b' or '70b'")
    return write_model_folder(path, shape)
