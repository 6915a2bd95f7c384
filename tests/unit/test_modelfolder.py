"""The model folders vLLM serves with --load-format dummy: config fields and tokenizer."""

from __future__ import annotations

import json
import random
import sys

import pytest

from tuner.modelfolder import (
    BOS,
    EOS,
    EOT,
    SHAPES,
    build_tokenizer,
    get_shape,
    llama_config,
    regular_tokens,
    special_tokens,
    write_llama_shape,
    write_model_folder,
    write_tiny_llama,
)

tokenizers = pytest.importorskip("tokenizers")
pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return write_tiny_llama(tmp_path_factory.mktemp("tiny"))


def _load(folder):
    return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


def test_tiny_config_is_the_small_llama(tiny_dir):
    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["model_type"] == "llama"
    assert (config["num_hidden_layers"], config["hidden_size"]) == (2, 128)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (4, 4)
    assert config["intermediate_size"] == 256
    assert config["vocab_size"] == 1024
    assert config["max_position_embeddings"] == 4096
    assert config["torch_dtype"] == "bfloat16"


def test_tiny_folder_has_every_file_vllm_reads(tiny_dir):
    names = {p.name for p in tiny_dir.iterdir()}
    assert names == {"config.json", "generation_config.json", "tokenizer.json",
                     "tokenizer_config.json", "special_tokens_map.json"}
    tok_cfg = json.loads((tiny_dir / "tokenizer_config.json").read_text())
    assert "add_generation_prompt" in tok_cfg["chat_template"]
    assert (tok_cfg["bos_token"], tok_cfg["eos_token"]) == (BOS, EOS)
    assert tok_cfg["model_max_length"] == 4096


def test_tiny_vocabulary_matches_config_and_special_ids(tiny_dir):
    tok = _load(tiny_dir)
    config = json.loads((tiny_dir / "config.json").read_text())
    assert tok.get_vocab_size(with_added_tokens=True) == config["vocab_size"]
    assert tok.token_to_id(BOS) == config["bos_token_id"] == 1008
    assert tok.token_to_id(EOS) == config["eos_token_id"] == 1009
    assert tok.token_to_id(EOT) == 1017


def test_text_of_vocabulary_words_round_trips(tiny_dir):
    tok = _load(tiny_dir)
    text = "ab cd , zz ! aaa 7"
    encoding = tok.encode(text)
    assert encoding.ids[0] == tok.token_to_id(BOS)
    assert 0 not in encoding.ids  # no <unk>
    assert tok.decode(encoding.ids) == text


def test_any_regular_id_sequence_round_trips(tiny_dir):
    tok = _load(tiny_dir)
    rng = random.Random(0)
    n_regular = SHAPES["tiny"].bos_token_id
    for _ in range(200):
        ids = [rng.randrange(1, n_regular) for _ in range(rng.randrange(1, 40))]
        assert tok.encode(tok.decode(ids), add_special_tokens=False).ids == ids


def test_folder_bytes_depend_only_on_the_shape(tmp_path, tiny_dir):
    again = write_tiny_llama(tmp_path / "again")
    for f in tiny_dir.iterdir():
        assert (again / f.name).read_bytes() == f.read_bytes(), f.name


@pytest.mark.parametrize("shape, hidden, layers, heads", [("8b", 4096, 32, 32),
                                                          ("70b", 8192, 80, 64)])
def test_llama3_configs(shape, hidden, layers, heads):
    config = llama_config(get_shape(shape))
    assert (config["hidden_size"], config["num_hidden_layers"]) == (hidden, layers)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (heads, 8)
    assert config["vocab_size"] == 128256
    assert (config["bos_token_id"], config["eos_token_id"]) == (128000, 128001)
    assert config["rope_theta"] == 500000.0


def test_llama3_tokenizer_has_the_full_vocabulary_at_meta_ids(tmp_path):
    folder = write_llama_shape(tmp_path / "8b", "8b")
    tok = _load(folder)
    assert tok.get_vocab_size(with_added_tokens=True) == 128256
    assert [tok.token_to_id(t) for t in (BOS, EOS, "<|start_header_id|>", EOT)] == [
        128000, 128001, 128006, 128009]
    assert tok.decode(tok.encode("the cat sat").ids) == "the cat sat"


def test_special_and_regular_token_lists():
    specials = special_tokens(256)
    assert specials[:2] == [BOS, EOS] and specials[9] == EOT
    assert specials[-1] == "<|reserved_special_token_250|>"
    tokens = regular_tokens(1008)
    assert tokens[:2] == ["<unk>", "!"] and tokens[95] == "aa"
    assert len(set(tokens)) == 1008


def test_bad_shapes_say_what_to_choose(tmp_path):
    with pytest.raises(ValueError, match="tiny"):
        write_model_folder(tmp_path, "13b")
    with pytest.raises(ValueError, match="'8b' or '70b'"):
        write_llama_shape(tmp_path, "tiny")
    with pytest.raises(ValueError, match="at most"):
        regular_tokens(10**7)


def test_build_tokenizer_is_deterministic():
    a = build_tokenizer(SHAPES["tiny"]).to_str()
    assert a == build_tokenizer(SHAPES["tiny"]).to_str()


def _run_cli(argv, capsys):
    """`tuner model ...` through the module's own parser (as tuner.cli.main wires it)."""
    from tuner.cli import _Parser, model
    from tuner.errors import TunerError

    parser = _Parser(prog="tuner")
    model.register(parser.add_subparsers(dest="command", parser_class=_Parser))
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except TunerError as e:
        code = e.exit_code
        print(f"tuner: error: {e}", file=sys.stderr)
    return code, capsys.readouterr()


def test_cli_model_make_writes_the_folder(tmp_path, capsys):
    code, out = _run_cli(["model", "make", str(tmp_path / "m"), "--shape", "tiny"], capsys)
    assert code == 0
    assert out.out.strip() == str(tmp_path / "m")
    assert "--load-format dummy" in out.err
    assert json.loads((tmp_path / "m" / "config.json").read_text())["vocab_size"] == 1024


def test_cli_model_make_unwritable_folder_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    code, out = _run_cli(["model", "make", str(tmp_path / "file" / "m")], capsys)
    assert code == 2
    assert "cannot write" in out.err and "writable folder" in out.err


# A small Qwen2 config.json, with the hub's token ids (which this tokenizer lacks).
SMALL_QWEN2 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
               "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096,
               "max_position_embeddings": 2048, "rope_theta": 1000000.0,
               "bos_token_id": 151643, "eos_token_id": 151645, "use_sliding_window": False,
               "sliding_window": 2048, "max_window_layers": 2, "tie_word_embeddings": True}


def test_a_hugging_face_config_is_kept_with_this_tokenizers_ids(tmp_path):
    folder = write_model_folder(tmp_path / "qwen", SMALL_QWEN2)
    config = json.loads((folder / "config.json").read_text())
    tok = _load(folder)
    assert tok.get_vocab_size(with_added_tokens=True) == 4096
    assert tok.token_to_id(BOS) == config["bos_token_id"] == 4096 - 16
    assert tok.token_to_id(EOS) == config["eos_token_id"]
    ours = {"bos_token_id", "eos_token_id"}
    assert {k: v for k, v in config.items() if k not in ours} == {
        k: v for k, v in SMALL_QWEN2.items() if k not in ours}
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["eos_token_id"] == config["eos_token_id"]
    tok_cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert tok_cfg["model_max_length"] == 2048


def test_a_config_without_a_dimension_says_which(tmp_path):
    with pytest.raises(ValueError, match="lacks intermediate_size"):
        write_model_folder(tmp_path, {k: v for k, v in SMALL_QWEN2.items()
                                      if k != "intermediate_size"})
