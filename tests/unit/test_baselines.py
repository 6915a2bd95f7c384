"""The baselines record the flags vLLM runs them with: the article's chunked launch gives
`--max-num-batched-tokens 256` and no `--max-num-seqs`, so vLLM runs it with 256 sequences
(at most the budget), not the default's 1,024, which vLLM refuses beside a 256-token budget.
Recorded as 1,024, it was a configuration that does not start: the simulator refused it, and
a user copying its flags would have got the refusal (the H200 started it, round 2 trial 2)."""

from pathlib import Path

from tuner.sim import evaluate, load_gpu, load_shape
from tuner.sim.workload import from_study
from tuner.space import baselines, build_space
from tuner.storage import load_study_file

REPO = Path(__file__).resolve().parents[2]


def _spec():
    spec = load_study_file(REPO / "studies" / "llama3-8b-h200.toml")
    model = spec.model.model_copy(update={"path": str(REPO / "studies/models/llama3-8b")})
    return spec.model_copy(update={"model": model})


def test_the_chunked_article_launch_records_the_sequences_vllm_runs():
    spec = _spec()
    space = build_space(spec)
    by_name = {b.name: b for b in baselines(space)}
    chunked = by_name["article-chunked"]
    assert "max_num_seqs" not in chunked.launch
    assert chunked.flags["max_num_batched_tokens"] == 256
    assert chunked.flags["max_num_seqs"] == 256
    assert not space.rules.violations(dict(chunked.flags), space.context)
    # the others give no budget smaller than the default's sequences: as before
    assert by_name["default"].flags["max_num_seqs"] == 1024
    assert by_name["article"].flags["max_num_seqs"] == 1024
    assert by_name["article"].flags["max_num_batched_tokens"] == 4096


def test_the_simulator_starts_the_chunked_article_launch():
    spec = _spec()
    space = build_space(spec)
    chunked = next(b for b in baselines(space) if b.name == "article-chunked")
    outcome = evaluate(dict(chunked.flags), load_shape(spec.model.path),
                       load_gpu(spec.hardware.gpu), from_study(spec.workload, 64))
    assert outcome.started, outcome.failure_kind
    assert outcome.output_throughput > 0
