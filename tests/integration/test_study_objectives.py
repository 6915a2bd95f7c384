"""`tuner study create` and the number of objectives (issue 43): the default sampler serves
one, two or three; a study it cannot serve is refused with one line, not sampled at
random."""

import pytest

METRICS = ("output_throughput", "p99_itl_ms", "p99_ttft_ms", "p99_e2el_ms")


def _study(count: int, sampler: str | None = None) -> str:
    text = '[model]\npath = "models/llama3-8b"\n'
    for i, metric in enumerate(METRICS[:count]):
        direction = "maximize" if i == 0 else "minimize"
        text += f'[[objectives]]\nmetric = "{metric}"\ndirection = "{direction}"\n'
    if sampler is not None:
        text += f'[search]\nsampler = "{sampler}"\n'
    return text


@pytest.mark.parametrize("sampler", [None, "auto", "front"])
def test_four_objectives_with_the_front_sampler_exit_2_in_one_line(sampler, study_file,
                                                                   run_cli, tmp_path):
    url = f"sqlite:///{tmp_path}/x.db"
    code, out, err = run_cli("study", "create", study_file(_study(4, sampler)),
                             "--storage", url)
    assert code == 2 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "this study has 4" in lines[0] and "fewer objectives" in lines[0], err
    assert "another sampler" in lines[0], err
    code, out, _ = run_cli("study", "list", "--storage", url)
    assert code == 0 and "no studies" in out  # nothing was created


@pytest.mark.parametrize("count,sampler", [(1, None), (3, "front"), (4, "tpe")])
def test_a_study_a_sampler_serves_is_created(count, sampler, study_file, run_cli, tmp_path):
    code, out, err = run_cli("study", "create", study_file(_study(count, sampler)),
                             "--storage", f"sqlite:///{tmp_path}/x.db")
    assert code == 0 and "created" in out, (code, out, err)
